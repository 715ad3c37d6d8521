#!/usr/bin/env python3
"""The planner's rooms and their arrows (docs/planner.md, "Where the code is").

    check_rooms.py PLANNER_DIR

Fails (exit 1, naming file and line) when
  * a file includes a file of a room above its own, or of a sibling room (the include arrows
    between rooms point one way: down this list);
  * a quoted include does not name a file by its path from planner/ ("sim/simulator.hpp");
  * a file lies outside every room;
  * a definition (a function or class at namespace level) runs over 300 lines without a
    reason written at its top: a comment line directly above it that starts "Long:".
"""
import os
import re
import sys

# Lowest first. A file may include files of its own room and of the rooms before it; rooms in
# one tuple are siblings and do not include each other. "" is planner/ itself: the registry of
# every method, which nothing inside the planner includes.
ROOMS = [
    "trace",                                        # the trace as the planner sees it
    "sim",                                          # the simulator that judges plans
    "common",                                       # the request, and what every method shares
    "bound",                                        # the lower bound and the LP solvers
    ("delta/sweep", "delta/remat", "delta/passes/evictions"),  # candidate makers; passes that evict
    "delta/hybrid",                                 # candidates from both: activations rebuilt, state swapped
    ("delta/passes/copies", "delta/passes/replays"),  # passes on the copies, and on the replays
    "delta/passes/placed",                          # passes on the finished plan as it will be placed
    "delta/passes",                                 # the passes' one shape, and discards kept
    "delta",                                        # DELTA's method: the pipeline
    "baselines",                                    # the methods DELTA is compared with
    "",                                             # methods.hpp: every method by name
]
LONG = 300

RANK = {}
for level, rooms in enumerate(ROOMS):
    for room in rooms if isinstance(rooms, tuple) else (rooms,):
        RANK[room] = level


def room_of(relative):
    """The room of a file (planner-relative path): its folder, when that is a room."""
    folder = os.path.dirname(relative)
    return folder if folder in RANK else None


def strip(src):
    """The source with comments and literals blanked out, lines kept."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
        elif src.startswith("/*", i):
            j = src.find("*/", i) + 2
        elif src.startswith('R"', i):
            delimiter = re.match(r'R"([^(]*)\(', src[i:]).group(1)
            j = src.find(")" + delimiter + '"', i) + len(delimiter) + 2
        elif c == "'" and i > 0 and src[i - 1].isalnum() and i + 1 < n and src[i + 1].isalnum():
            j = i + 1  # a digit separator (12'000)
        elif c in "\"'":
            j = i + 1
            while src[j] != c:
                j += 2 if src[j] == "\\" else 1
            j += 1
        else:
            out.append(c)
            i += 1
            continue
        out.append(re.sub(r"[^\n]", " ", src[i:j]))
        i = j
    return "".join(out)


def definitions(text):
    """(first line, last line) of every brace block at namespace level."""
    code = strip(text)
    stack, found, line, start = [], [], 1, 0
    for k, ch in enumerate(code):
        if ch == "\n":
            line += 1
        elif ch == "{":
            head = code[max(0, k - 200):k]
            is_namespace = bool(re.search(r'(namespace[\w:\s]*|extern\s+"C"\s*)$', head))
            if all(stack) and not is_namespace:
                start = line
            stack.append(is_namespace)
        elif ch == "}":
            if not stack:
                break
            is_namespace = stack.pop()
            if all(stack) and not is_namespace:
                found.append((start, line))
    return found


def main(planner):
    problems = []
    include_names = set()
    public = os.path.join(planner, "..", "include", "delta")
    if os.path.isdir(public):
        include_names = set(os.listdir(public))
    for folder, _, files in os.walk(planner):
        for name in sorted(files):
            if not name.endswith((".cpp", ".hpp")):
                continue
            path = os.path.join(folder, name)
            relative = os.path.relpath(path, planner)
            room = room_of(relative)
            if room is None:
                problems.append(f"{relative}: in no room (rooms: {', '.join(r or '.' for r in RANK)})")
                continue
            if room.startswith("delta") and name in include_names:
                problems.append(f"{relative}: named like include/delta/{name}, which \"delta/{name}\" would find first")
            text = open(path, encoding="utf-8").read()
            lines = text.split("\n")
            for number, line in enumerate(lines, 1):
                match = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not match:
                    continue
                target = match.group(1)
                if not os.path.isfile(os.path.join(planner, target)):
                    problems.append(f"{relative}:{number}: includes \"{target}\", not a path from planner/")
                    continue
                other = room_of(target)
                if other is None or other == room:
                    continue
                if RANK[other] > RANK[room] or (RANK[other] == RANK[room]):
                    problems.append(f"{relative}:{number}: {room or 'planner/'} includes {target} "
                                    f"of {other or 'planner/'}, a room {'above it' if RANK[other] > RANK[room] else 'beside it'}")
            for first, last in definitions(text):
                if last - first + 1 <= LONG:
                    continue
                above = lines[first - 2].strip() if first >= 2 else ""
                if not above.startswith("// Long:"):
                    problems.append(f"{relative}:{first}: a definition of {last - first + 1} lines "
                                    f"(over {LONG}: cut it along its seams, or say why at its top with '// Long: ...')")
    for problem in problems:
        print(problem)
    print(f"{len(problems)} problems" if problems else "the rooms' arrows point one way; no definition over "
          f"{LONG} lines without its reason")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "planner")))
