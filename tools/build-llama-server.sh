#!/usr/bin/env bash
# Builds llama.cpp's own HTTP server (llama-server), for the HTTP-upstream tests and for
# `make run-upstream`: from the llama.cpp sources that the llama-cpp-python sdist vendors
# (the same release the llamacpp extra builds), without its web UI, for any x86-64 CPU
# with AVX2. The binary is kept in a cache folder outside the checkout, keyed by the
# release and the flags, so a clean clone on the same machine does not build it again.
#
#   tools/build-llama-server.sh PYTHON DEST VERSION "CMAKE FLAGS"
set -euo pipefail
py=$1 dest=$2 version=$3 flags=$4
key=$(echo "$version $flags" | cksum | cut -d' ' -f1)
cache="${NEUTRINO_BUILD_CACHE:-$HOME/.cache/neutrino}/llama-server-$version-$key"
if [ ! -x "$cache/llama-server" ]; then
	echo "building llama-server $version (llama.cpp's server; takes minutes the first time)"
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	"$py" -m pip download -q --no-deps --no-binary=:all: -d "$work" "llama-cpp-python==$version"
	tar -xzf "$work"/llama_cpp_python-"$version".tar.gz -C "$work"
	src="$work/llama_cpp_python-$version/vendor/llama.cpp"
	# shellcheck disable=SC2086
	cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
		-DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
		-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF $flags >"$work/cmake.log" 2>&1 \
		|| { tail -30 "$work/cmake.log"; exit 1; }
	cmake --build "$work/build" --target llama-server -j"$(nproc)" >"$work/build.log" 2>&1 \
		|| { tail -30 "$work/build.log"; exit 1; }
	mkdir -p "$cache"
	cp "$work/build/bin/llama-server" "$cache/llama-server.part"
	cp "$src/LICENSE" "$cache/LICENSE"
	mv "$cache/llama-server.part" "$cache/llama-server"
fi
mkdir -p "$(dirname "$dest")"
cp "$cache/llama-server" "$dest"
