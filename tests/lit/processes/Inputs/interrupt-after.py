#!/usr/bin/env python3
"""interrupt-after.py LOG LINES SIGNAL[@children] CMD...: runs CMD, waits
until the file LOG has at least LINES lines (a JSON log: steps done), sends
SIGNAL (INT or TERM) to CMD, or with @children to CMD's child processes (the
ranks mpirun started, as a scheduler signals every task), and waits for CMD
to end; prints CMD's stdout and "exit N". Gives up (exit 1) after 120 s."""
import os, signal, subprocess, sys, time

log, lines = sys.argv[1], int(sys.argv[2])
name, _, whom = sys.argv[3].partition("@")
sig = getattr(signal, "SIG" + name)


def children(pid):
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open("/proc/%s/stat" % entry).read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry))
    return out

p = subprocess.Popen(sys.argv[4:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
deadline = time.monotonic() + 120
while time.monotonic() < deadline and p.poll() is None:
    try:
        if sum(1 for _ in open(log)) >= lines:
            break
    except FileNotFoundError:
        pass
    time.sleep(0.05)
else:
    p.kill()
    print("the run ended or stalled before %d steps" % lines)
    sys.exit(1)
if whom == "children":
    for child in children(p.pid):
        os.kill(child, sig)
else:
    p.send_signal(sig)
try:
    out, _ = p.communicate(timeout=120)
except subprocess.TimeoutExpired:
    p.kill()
    print("still running 120 s after the signal")
    sys.exit(1)
sys.stdout.write(out.decode(errors="replace").replace("\r", "\n"))
print("exit %d" % p.returncode)
