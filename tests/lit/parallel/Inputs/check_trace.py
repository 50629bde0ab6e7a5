"""Checks a Chrome trace from mgc run --trace: every device has a compute
and a communication queue with events, names come from the metadata, and
the all-reduces run on the communication queues."""
import json
import sys

path, devices = sys.argv[1], int(sys.argv[2])
events = json.load(open(path))["traceEvents"]
spans = [e for e in events if e.get("ph") == "X"]
names = {(e["pid"], e.get("tid")): e["args"]["name"]
         for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
procs = {e["pid"]: e["args"]["name"]
         for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
queues = {(e["pid"], e["tid"]) for e in spans}
assert {p for p, _ in queues} == set(range(devices)), queues
assert all(procs[p] == "device %d" % p for p in range(devices)), procs
assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in spans)
comm = {names[(e["pid"], e["tid"])] for e in spans if e["name"] == "all_reduce"}
assert comm == {"communication"}, comm
print("devices %d, queues %d, all_reduce on communication queues"
      % (devices, len(queues)))
