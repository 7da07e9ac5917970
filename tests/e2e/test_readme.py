"""The commands README.md and docs/API.md show, run as written: every `build/cpu/bin/pagoda ...` line of their
sh blocks that needs nothing the repository lacks (lines naming `path/to/...`, the cuda build, or `&` are
left out), with the binary under test in place of build/cpu/bin/pagoda; and the README's curl lines against
a `pagoda serve` of the bundled model, with its port in place of 8000. Each must exit 0 (curl: an HTTP 200
with a JSON body). The README's `pagoda bench serve` line has its own test (test_bench_serve.py)."""
import json
import os
import re
import shlex
import subprocess
import unittest

import pagoda_cli
from test_server import Server

def PAGODA():
    return os.path.abspath(pagoda_cli.ARGS.pagoda)


ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def sh_blocks(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        text = f.read()
    return re.findall(r"```sh\n(.*?)```", text, re.S)


def commands(path):
    """Each command of the sh blocks, continuation lines joined, trailing comments dropped."""
    out = []
    for block in sh_blocks(path):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.strip()
            if line:
                out.append(line)
    return out


def without_comment(line):
    parts = shlex.split(line, comments=True)
    return parts


class ReadmeCommands(unittest.TestCase):
    def runnable(self, path):
        lines = []
        for line in commands(path):
            if not line.startswith("build/cpu/bin/pagoda "):
                continue
            if "path/to" in line or "&" in without_comment(line) or " bench serve " in line:
                continue
            lines.append(line)
        return lines

    def run_line(self, line):
        argv = without_comment(line)
        argv[0] = PAGODA()
        proc = subprocess.run(argv, input="", capture_output=True, text=True, timeout=300, cwd=ROOT)
        self.assertEqual(proc.returncode, 0, f"{line}\n{proc.stderr}")
        return proc

    def test_cli_lines(self):
        lines = self.runnable("README.md")
        self.assertGreaterEqual(len(lines), 5, "the README's usage block should have been found")
        for line in lines:
            with self.subTest(line=line):
                self.run_line(line)

    def test_piped_lines(self):
        # `echo ... | pagoda tokenize --jsonl`: the shell pipeline as written.
        for line in commands("README.md"):
            if "| build/cpu/bin/pagoda" not in line:
                continue
            with self.subTest(line=line):
                cmd = line.replace("build/cpu/bin/pagoda", shlex.quote(PAGODA())).split(" #")[0]
                proc = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=120, cwd=ROOT)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertTrue(proc.stdout.strip())

    def test_curl_lines_against_the_bundled_model(self):
        curls = [line for line in commands("README.md") if line.startswith("curl ")]
        self.assertGreaterEqual(len(curls), 3)
        server = Server()
        try:
            for line in curls:
                with self.subTest(line=line):
                    argv = [a.replace("localhost:8000", f"127.0.0.1:{server.port}") for a in without_comment(line)]
                    argv += ["-w", "\n%{http_code}"]
                    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
                    self.assertEqual(proc.returncode, 0, proc.stderr)
                    body, status = proc.stdout.rsplit("\n", 1)
                    self.assertEqual(status, "200", body)
                    if "/metrics" in line:
                        self.assertIn("pagoda:", body)
                    elif '"stream": true' in line:
                        self.assertTrue(body.strip().endswith("data: [DONE]"), body[-200:])
                    else:
                        out = json.loads(body)
                        self.assertTrue(out["choices"], out)
                        if "json_object" in line:
                            # Chat's default max_tokens is the rest of the context: the object is whole
                            # unless the context ran out first.
                            if out["choices"][0]["finish_reason"] == "stop":
                                self.assertIsInstance(json.loads(out["choices"][0]["message"]["content"]), dict)
        finally:
            self.assertEqual(server.stop(), 0)

    def test_api_md_cli_lines(self):
        lines = [line for line in commands("docs/API.md") if line.startswith("build/cpu/bin/pagoda ")]
        for line in lines:
            if "path/to" in line:
                continue
            with self.subTest(line=line):
                # `pagoda serve` lines: the server must come up with those flags (then it is stopped).
                argv = without_comment(line)
                self.assertEqual(argv[1], "serve")
                args = [a for a in argv[2:]]
                if "--port" in args:
                    i = args.index("--port")
                    del args[i:i + 2]
                server = Server(*args)
                self.assertEqual(server.stop(), 0)


if __name__ == "__main__":
    pagoda_cli.main()
