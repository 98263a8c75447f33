#!/usr/bin/env bash
# install.sh BUILD BINDIR PREFIX [DESTDIR]: what `make install PREFIX=...` installs, from an
# existing build: PREFIX/bin/* (the executables), PREFIX/lib/liblingvoc.{a,so*} (the
# shared library with its soname link), PREFIX/include/lingvoc.h,
# PREFIX/lib/pkgconfig/lingvoc.pc and PREFIX/experiments (which bin/* and the library
# find as <bin or lib>/../experiments). tests/test_api.sh runs it without make.
set -euo pipefail
build=$1 bindir=$2 prefix=$3 dest=${4:-}
root=$(cd "$(dirname "$0")/.." && pwd)
so=$(cd "$build" && ls liblingvoc.so.*.*.* | head -1)
soname=$(readelf -d "$build/$so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
d=$dest$prefix
install -d "$d/bin" "$d/lib/pkgconfig" "$d/include"
install -m 755 "$bindir"/* "$d/bin/"
install -m 644 "$build/liblingvoc.a" "$d/lib/"
install -m 755 "$build/$so" "$d/lib/"
ln -sf "$so" "$d/lib/$soname"
ln -sf "$soname" "$d/lib/liblingvoc.so"
install -m 644 "$root/include/lingvoc.h" "$d/include/"
sed "s|@PREFIX@|$prefix|" "$build/lingvoc.pc" >"$d/lib/pkgconfig/lingvoc.pc"
rm -rf "$d/experiments"
cp -r "$root/experiments" "$d/experiments"
echo "installed lingvoc into $d"
