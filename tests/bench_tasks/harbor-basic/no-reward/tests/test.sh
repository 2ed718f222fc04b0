#!/bin/bash
echo "all tests passed (but no reward file is written)"
exit 0
