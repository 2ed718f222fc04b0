#!/bin/bash
echo done
