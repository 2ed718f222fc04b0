#!/bin/bash
python3 -c 'table = b"x" * (300 * 1024 * 1024); print(len(table))'
touch /app/done
