# vkML's commands. Each target runs scripts/setup.sh first (apt packages, .venv, the package; a few
# seconds once done), so every one works on a fresh Debian/Ubuntu machine.
PY := .venv/bin/python

.PHONY: demo test docs bench clean

## make demo: train the digits CNN on the default Vulkan device (set-up timed apart by the demo)
demo:
	scripts/setup.sh
	$(PY) -m vkml.demo

## make test: the sync check, every notebook, every test; ends on pytest's summary line
test:
	scripts/test.sh

## make docs: run the notebooks in a Jupyter kernel and build the site into _site/
docs:
	scripts/setup.sh --docs
	$(PY) scripts/docs.py

## make bench: time a few operations on every available device; JSON into _bench/
bench:
	scripts/setup.sh
	$(PY) scripts/bench.py

## make clean: remove what builds and runs leave behind (keeps .venv)
clean:
	rm -rf _site _docs _proc _bench build dist .pytest_cache .hypothesis nbs/llms.txt
	find . -name __pycache__ -type d -not -path './.venv/*' -prune -exec rm -rf {} +
