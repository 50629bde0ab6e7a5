"""nest.py DIR N: models whose output nests N calls, parentheses, signs or
lists (calls.mg, parens.mg, signs.mg, lists.mg)."""
import sys

folder, n = sys.argv[1], int(sys.argv[2])
bodies = {
    "calls": "relu(" * n + "x" + ")" * n,
    "parens": "(" * n + "x" + ")" * n,
    "signs": "-" * n + "x",
    # reshape's list: n - 1 nested lists inside its own.
    "lists": "reshape(x, " + "[" * (n - 1) + "4" + "]" * (n - 1) + ")",
}
for name, body in bodies.items():
    with open("%s/%s.mg" % (folder, name), "w") as f:
        f.write("model m {\n  input x: f32[4]\n  output y = %s\n}\n" % body)
