#!/bin/bash
python3 -c 'print("\n".join(str(i * i) for i in range(1, 6)))' > squares.txt
