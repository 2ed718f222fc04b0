#!/bin/bash
echo "$GREETING, $1!"
