#!/bin/bash
# greet is executable only because the Dockerfile's COPY --chmod made it so.
greet "$TARGET" > hello.txt
echo "wrote $(pwd)/hello.txt"
