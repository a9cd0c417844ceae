#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""ptyrun.py: runs a command on a pseudo-terminal of a given width, as a
person at a terminal would, and checks that no line it draws is wider than
the terminal is at that moment.

  ptyrun.py --cols N --log FILE [--resize M --interrupt --resume-to FILE
            --when-files DIR:K] -- COMMAND...

Lines are the output split at \\r and \\n with ANSI sequences removed; one of
N or more columns is too wide (the program keeps the last column free).
--when-files DIR:K waits until DIR holds K regular files not named
.rdmafs-copy.*, and a progress line was drawn; then --resize M sets the
terminal to M columns (the kernel sends SIGWINCH) and waits for a line
drawn at the new width; then --interrupt sends SIGINT to it as Ctrl-C does
(without the "^C" a terminal echoes) and the command must
say how to resume: the command it prints goes to --resume-to. Every wait is
bounded (a hang guard, not a speed test).

Exit: 0 pass, 1 fail (said why), 99 the test could not check (the command
ended before the moment to interrupt it).
"""
import argparse
import fcntl
import os
import re
import select
import signal
import struct
import sys
import termios
import time

ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")
WAIT = 300  # seconds: bounds a hang only


def set_width(fd, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))


def lines_of(data):
    return [ANSI.sub(b"", x) for x in re.split(rb"[\r\n]", data)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cols", type=int, required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--resize", type=int)
    ap.add_argument("--interrupt", action="store_true")
    ap.add_argument("--resume-to")
    ap.add_argument("--when-files")
    ap.add_argument("--expect-status", type=int, default=0)
    ap.add_argument("command", nargs="+")
    a = ap.parse_args()

    pid, master = os.forkpty()
    if pid == 0:
        set_width(0, a.cols)
        try:
            os.execv(a.command[0], a.command)
        finally:
            os._exit(127)
    set_width(master, a.cols)

    out = bytearray()
    status = None
    # (offset in out, width from there on)
    widths = [(0, a.cols)]
    fails = []

    def pump(timeout):
        """reads what is there; False once the command ended and all is read"""
        nonlocal status
        data = b""
        r, _, _ = select.select([master], [], [], timeout)
        if r:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the command and its children closed the terminal
                data = b""
            out.extend(data)
        if status is None:
            wpid, st = os.waitpid(pid, os.WNOHANG)
            if wpid:
                status = os.waitstatus_to_exitcode(st)
        return status is None or bool(data)

    def wait_for(cond):
        deadline = time.monotonic() + WAIT
        while not cond():
            if not pump(0.05):
                return "ended"
            if time.monotonic() > deadline:
                return "timeout"
        return None

    def progress_lines(start=0):
        return [x for x in lines_of(bytes(out[start:])) if b"/s" in x or b"ETA" in x
                or b"files " in x or b"]" in x]

    staged = a.when_files is not None
    if staged:
        d, k = a.when_files.rsplit(":", 1)

        def enough():
            try:
                names = [n for n in os.listdir(d) if not n.startswith(".rdmafs-copy.")
                         and os.path.isfile(os.path.join(d, n))]
            except FileNotFoundError:
                return False
            return len(names) >= int(k) and progress_lines()
        why = wait_for(enough)
        if why:
            print(f"ERROR: the command {why} before {k} files were in {d}: "
                  "nothing to interrupt", file=sys.stderr)
            open(a.log, "wb").write(out)
            if status is None:
                os.kill(pid, signal.SIGKILL)
            return 99
        if a.resize:
            mark = len(out)
            set_width(master, a.resize)

            def narrow_drawn():
                return any(0 < len(x) < a.resize for x in progress_lines(mark))
            why = wait_for(narrow_drawn)
            if why:
                fails.append(f"no progress line drawn at {a.resize} columns after "
                             f"the resize ({why})")
            # between the change and the narrow line seen, lines drawn before the
            # program saw SIGWINCH may still come: the old width bounds them
            widths.append((mark, a.cols))
            widths.append((len(out), a.resize))
        if a.interrupt:
            # what Ctrl-C does, without the "^C" the terminal would echo
            os.killpg(pid, signal.SIGINT)
    deadline = time.monotonic() + WAIT
    while pump(0.1):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            fails.append("the command did not end")
            break
    while status is None:
        pump(0.1)
    open(a.log, "wb").write(out)

    for i, (start, cols) in enumerate(widths):
        end = widths[i + 1][0] if i + 1 < len(widths) else len(out)
        for line in lines_of(bytes(out[start:end])):
            if len(line.decode("utf-8", "replace")) >= cols:
                fails.append(f"a line of {len(line)} columns at {cols}: {line!r}")
    if not progress_lines():
        fails.append("no progress line drawn")
    if a.resize and staged:
        before = [x for x in lines_of(bytes(out[:widths[1][0]])) if len(x) >= a.resize]
        if not before:
            fails.append(f"no line of {a.resize} columns or more before the resize: "
                         "the narrowing proves nothing")
    if status != a.expect_status:
        fails.append(f"exit status {status}, wanted {a.expect_status}")
    if a.interrupt:
        # what the terminal shows: each line as the last \r left it
        shown = ANSI.sub(b"", bytes(out)).replace(b"\r\n", b"\n").split(b"\n")
        text = "\n".join(x.split(b"\r")[-1].decode("utf-8", "replace") for x in shown)
        if "interrupted by SIGINT" not in text.replace("\n  ", " "):
            fails.append("no summary of the interruption")
        m = re.search(r"to resume, run:\n((?:.*\\\n)*.*)", text)
        if not m:
            fails.append("no resume command")
        elif a.resume_to:
            open(a.resume_to, "w").write(m.group(1) + "\n")
    for f in fails:
        print("FAIL:", f, file=sys.stderr)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
