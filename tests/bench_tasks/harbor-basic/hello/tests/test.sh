#!/bin/bash
if [ "$(cat /app/hello.txt 2>/dev/null)" = "$EXPECTED" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
# The exit code does not count: only the reward file does.
exit 3
