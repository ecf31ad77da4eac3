"""Loom token files read and written with nothing but `struct`.

An independent implementation of docs/token-file.md, so that lit tests can
check loom-tokenize against it:

  token_file.py write PATH WIDTH ID...   write the ids with WIDTH (2 or 4) bytes
  token_file.py dump PATH                print "width W count N", then the ids
  token_file.py compare PATH FILE        check that PATH holds FILE's bytes
"""

import struct
import sys

HEADER = struct.Struct("<8sIIQ")  # magic, version, bytes per token, count
FORMATS = {2: "H", 4: "I"}


def write(path, width, ids):
    with open(path, "wb") as f:
        f.write(HEADER.pack(b"LOOMTOKS", 1, width, len(ids)))
        f.write(struct.pack("<%d%s" % (len(ids), FORMATS[width]), *ids))


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    magic, version, width, count = HEADER.unpack_from(data)
    assert magic == b"LOOMTOKS" and version == 1, (magic, version)
    assert len(data) == HEADER.size + width * count, (len(data), count)
    ids = struct.unpack_from("<%d%s" % (count, FORMATS[width]), data,
                             HEADER.size)
    return width, list(ids)


def main(argv):
    command, path = argv[1], argv[2]
    if command == "write":
        write(path, int(argv[3]), [int(i) for i in argv[4:]])
    elif command == "dump":
        width, ids = read(path)
        print("width %d count %d" % (width, len(ids)))
        print(" ".join(str(i) for i in ids))
    elif command == "compare":
        _, ids = read(path)
        with open(argv[3], "rb") as f:
            expected = list(f.read())
        if ids != expected:
            sys.exit("%s: %d ids differ from the %d bytes of %s" %
                     (path, len(ids), len(expected), argv[3]))
        print("match: %d tokens" % len(ids))
    else:
        sys.exit("unknown command " + command)


if __name__ == "__main__":
    main(sys.argv)
