#!/usr/bin/env python3
"""signal-during-save.py DIR SIGNAL ROUNDS MGC-RUN-ARGS...

Starts `mgc run MGC-RUN-ARGS --steps 1000000 --save DIR/c.ckpt --save-every 1`
ROUNDS times
and sends SIGNAL (TERM, INT or KILL) at a random moment after its first
save, when most of the time goes into saving: the signal often lands inside
a save. Each time the checkpoint left behind must load (the next round
resumes from it, so the loader checks every tensor's checksum), and the
exit status must be 143 for TERM, 130 for INT, -9 for KILL. Prints one line
per round."""
import os, random, signal, subprocess, sys, time

folder, name, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
args = sys.argv[4:]
ckpt = os.path.join(folder, "c.ckpt")
expected = {"TERM": 143, "INT": 130, "KILL": -9}[name]
random.seed(7)
for r in range(rounds):
    resume = ["--resume", ckpt] if os.path.exists(ckpt) else []
    before = os.path.getmtime(ckpt) if resume else None
    p = subprocess.Popen(["mgc", "run"] + args + resume +
                         ["--steps", "1000000", "--save", ckpt,
                          "--save-every", "1"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while time.time() < deadline and (not os.path.exists(ckpt) or
                                      os.path.getmtime(ckpt) == before):
        if p.poll() is not None:
            sys.exit("round %d: mgc run ended before its first save: %s" %
                     (r, p.stderr.read().decode()))
        time.sleep(0.01)
    time.sleep(random.uniform(0, 0.3))
    p.send_signal(getattr(signal, "SIG" + name))
    _, err = p.communicate(timeout=120)
    if p.returncode != expected:
        sys.exit("round %d: exit %s, expected %s: %s" %
                 (r, p.returncode, expected, err.decode()))
    print("round %d: exit %d" % (r, p.returncode))
# The last checkpoint loads too.
check = subprocess.run(["mgc", "run"] + args + ["--resume", ckpt, "--steps", "1"],
                       capture_output=True, text=True)
if check.returncode != 0:
    sys.exit("the last checkpoint does not load: " + check.stderr)
print(check.stdout.strip().splitlines()[-1])
