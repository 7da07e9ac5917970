"""Helpers for end-to-end tests that run the real `pagoda` binary."""
import argparse
import json
import os
import subprocess
import sys
import unittest


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pagoda", required=True, help="path to the pagoda binary")
    parser.add_argument("--data", required=True, help="tests/data directory")
    args, rest = parser.parse_known_args()
    return args, [sys.argv[0]] + rest


ARGS = None

# How much slower than a plain build the binary under test runs: the sanitizer targets of the Makefile set
# PAGODA_E2E_TIME_SCALE (ThreadSanitizer runs the server 5-15 times slower), and bounds on how long a request
# may take are multiplied by it. Bounds on how long other clients wait (isolation) are not.
TIME_SCALE = float(os.environ.get("PAGODA_E2E_TIME_SCALE", "1"))


def run(*argv, stdin=None, check=True, timeout=300):
    proc = subprocess.run([ARGS.pagoda, *argv], input=stdin, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"pagoda {' '.join(argv)} exited {proc.returncode}: {proc.stderr}")
    return proc


def run_json(*argv, **kwargs):
    return json.loads(run(*argv, **kwargs).stdout)


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    global ARGS
    ARGS, argv = parse_args()
    unittest.main(argv=argv, verbosity=2)
