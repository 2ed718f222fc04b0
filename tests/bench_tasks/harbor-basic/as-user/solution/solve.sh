#!/bin/bash
id -un > whoami.txt
