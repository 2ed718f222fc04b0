"""The Feishu bot: an app created by QR code, a long connection, pairing, and the answers to
/gpu, /runs and /show (docs/notify.md#the-feishu-bot). Its result cards go out through the
notification sender (orbit/notify/feishu_app.py); its files are store/feishu.py's."""
