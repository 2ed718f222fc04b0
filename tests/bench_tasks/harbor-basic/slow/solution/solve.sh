#!/bin/bash
echo started > /app/partial.txt
sleep 600
echo finished > /app/final.txt
