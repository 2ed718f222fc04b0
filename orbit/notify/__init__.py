"""orbit notify: messages to chat tools when runs and groups finish (docs/notify.md)."""
