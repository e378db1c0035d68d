#!/bin/sh
# Build the WASI preview 1 guests in guests/c from their sources, reproducibly, with Debian's toolchain:
#   C:    clang --target=wasm32-wasi + wasi-libc   (packages: clang lld wasi-libc libclang-rt-dev-wasm32)
#   Rust: rustc --target wasm32-wasi               (packages: rustc libstd-rust-dev-wasm32)
#
#   guests/c/build.sh           rebuild every NAME.wasm next to its NAME.c / NAME.rs
#   guests/c/build.sh --check   rebuild into a temporary directory and compare byte for byte with the
#                               committed files; exit 1 naming every file that differs or is missing
#
# Debug sections (Debian builds wasi-libc with -g) are stripped; the "name" section stays, so a trap
# names the function it happened in.
# Reproducible: each compiler runs inside a scratch copy of this folder on a relative file name, with
# the scratch path mapped to "." (-ffile-prefix-map / --remap-path-prefix), so no absolute path, user
# or time reaches the output (wasm-ld and rustc write no timestamps). The "producers" section names the
# compiler versions, so a different clang or rustc release gives different bytes: CI installs the same
# Debian bookworm packages this was built with (clang 14.0.6, wasi-libc 0.0~git20220510, rustc 1.63.0).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
CC=${CC:-/usr/bin/clang}
RUSTC=${RUSTC:-/usr/bin/rustc}
CFLAGS="--target=wasm32-wasi -O2 -Wall -Wextra -Werror -Wl,--strip-debug"
RUSTFLAGS="--edition 2021 --target wasm32-wasi -C opt-level=s -C strip=symbols -C panic=abort -C codegen-units=1"

check=0
if [ "${1:-}" = "--check" ]; then check=1; elif [ $# -gt 0 ]; then echo "usage: $0 [--check]" >&2; exit 2; fi

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp "$here"/*.c "$here"/*.rs "$scratch"/
cd "$scratch"
for src in *.c; do
    "$CC" $CFLAGS -ffile-prefix-map="$scratch"=. -o "${src%.c}.wasm" "$src"
done
for src in *.rs; do
    "$RUSTC" $RUSTFLAGS --remap-path-prefix="$scratch"=. -o "${src%.rs}.wasm" "$src"
done

status=0
for built in *.wasm; do
    if [ "$check" = 1 ]; then
        if [ ! -f "$here/$built" ]; then
            echo "build.sh --check: guests/c/$built is not committed" >&2
            status=1
        elif ! cmp -s "$built" "$here/$built"; then
            echo "build.sh --check: guests/c/$built differs from what its source builds" >&2
            status=1
        fi
    else
        cp "$built" "$here/$built"
    fi
done
if [ "$check" = 1 ]; then
    for committed in "$here"/*.wasm; do
        [ -f "$(basename "$committed")" ] || { echo "build.sh --check: $committed has no source" >&2; status=1; }
    done
    [ "$status" = 0 ] && echo "build.sh --check: every guests/c/*.wasm is what its source builds"
fi
exit $status
