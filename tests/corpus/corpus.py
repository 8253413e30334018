"""The python3 program of the corpus: the interpreter runs these functions, so a native
profiler sees the interpreter's C functions (the eval loop, the objects' methods, the
modules' C code), not these names. Each function adds its CPU time (time.process_time) to
its total; the split is printed as the other programs print theirs, for the reader.
argv[1]: rounds."""
import json
import re
import sys
import time

totals = {}


def timed(f):
    def run(*a):
        t0 = time.process_time()
        r = f(*a)
        totals[f.__name__] = totals.get(f.__name__, 0.0) + time.process_time() - t0
        return r

    return run


@timed
def arithmetic(n):
    s = 0
    for i in range(n):
        s += i * i % 7
    return s


@timed
def strings(words):
    return len(" ".join(w.upper() for w in words).split())


@timed
def json_roundtrip(doc):
    return len(json.loads(json.dumps(doc)))


@timed
def regex_scan(text):
    return len(re.findall(r"[a-z]+\d{2,}", text))


@timed
def sort_records(records):
    return sorted(records, key=lambda r: (r["b"], r["a"]))[0]["a"]


def main():
    start = time.process_time()
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    words = ["w%d" % (i * 7919 % 1000) for i in range(20000)]
    doc = [{"a": i, "b": str(i * 31 % 97), "c": [i, i + 1]} for i in range(3000)]
    text = " ".join("abc%d" % i for i in range(20000))
    x = 0
    for _ in range(rounds):
        x += arithmetic(60000)
        x += strings(words)
        x += json_roundtrip(doc)
        x += regex_scan(text)
        x += sort_records(doc)
    parts = " ".join("%s %.6f" % kv for kv in totals.items())
    print("split total %.6f %s" % (time.process_time() - start, parts))
    return x


main()
