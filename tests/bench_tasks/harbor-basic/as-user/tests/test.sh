#!/bin/bash
# The solve ran as [agent].user, the verifier as [verifier].user.
if [ "$(cat /app/whoami.txt 2>/dev/null)" = nobody ] && [ "$(stat -c %U /app/whoami.txt)" = nobody ] \
   && [ "$(id -un)" = root ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
