"""Replace the H200 prefill/decode tables in docs/benchmarks.md from a bench JSON (H200 section above the targets)."""
import subprocess, sys
from pathlib import Path

doc = Path("docs/benchmarks.md"); s = doc.read_text()
tables = subprocess.run([sys.executable, "benchmarks/render_tables.py", sys.argv[1]], capture_output=True, text=True, check=True).stdout
pre, dec = tables.split("\n| kv |", 1)
dec = "| kv |" + dec.split("\nnot ok:")[0]
a = s.index("### Prefill (causal, S == L)"); b = s.index("### Reading it against the targets")
s = s[:a] + "### Prefill (causal, S == L)\n" + pre.rstrip() + "\n\n### Decode (S = 1, causal)\n\n" + dec.strip() + "\n\n" + s[b:]
doc.write_text(s)
