#!/bin/bash
echo 42 > /app/out.txt
echo scratch > /app/scratch.txt
echo "solve notes" > /logs/artifacts/notes.txt
