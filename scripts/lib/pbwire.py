"""The protobuf wire format, read without generated code or a protobuf library, for the
scripts that check lingvoc's files from the outside (bench/las_torch.py's tf.Examples,
scripts/lingvo_peer/check_files.py's events): any Python 3, standard library only."""


def varint(b, i):
    """The varint at b[i:] and the index after it."""
    r = s = 0
    while True:
        c = b[i]
        i += 1
        r |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return r, i


def fields(b):
    """(field number, wire type, value) of a protobuf message; value: int (varint) or bytes
    (length-delimited, fixed32, fixed64)."""
    i = 0
    while i < len(b):
        k, i = varint(b, i)
        t = k & 7
        if t == 0:
            v, i = varint(b, i)
        elif t == 2:
            n, i = varint(b, i)
            v, i = b[i : i + n], i + n
        elif t == 5:
            v, i = b[i : i + 4], i + 4
        elif t == 1:
            v, i = b[i : i + 8], i + 8
        else:
            raise ValueError("wire type %d" % t)
        yield k >> 3, t, v
