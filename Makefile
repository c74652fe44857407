# make demo: run the quickstart, Llama and chat examples.  make test: run the test suite.  Both install what they need.
PYTHON ?= python3
# One stamp per interpreter (a hash of its sys.executable): `make demo` in one virtual environment does not let
# `make test` in another skip the install.
STAMP := .setup-$(shell $(PYTHON) -c 'import hashlib, sys; print(hashlib.sha256(sys.executable.encode()).hexdigest()[:12])').stamp
PIP_INSTALL ?= $(PYTHON) -m pip install -q -e '.[test]'
# where the Vulkan loader finds drivers (ICD manifests): one in any of them is enough (one `ls` of both globs failed
# when either folder was empty, and installed lavapipe over a working driver, or failed without root)
VULKAN_ICD_DIRS ?= /usr/share/vulkan/icd.d /etc/vulkan/icd.d
LAVAPIPE_INSTALL ?= apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mesa-vulkan-drivers libvulkan1 >/dev/null

.PHONY: setup demo test bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@if [ -z "$${VK_DRIVER_FILES}$${VK_ICD_FILENAMES}" ] \
	    && ! for d in $(VULKAN_ICD_DIRS); do ls $$d/*.json; done 2>/dev/null | grep -q .; then \
	  echo "no Vulkan driver found: installing Mesa's lavapipe"; \
	  $(LAVAPIPE_INSTALL); \
	fi
	$(PIP_INSTALL)
	@touch $(STAMP)

demo: setup
	$(PYTHON) examples/quickstart.py
	$(PYTHON) examples/llama_generate.py
	$(PYTHON) examples/chat.py

test: setup
	$(PYTHON) -m pytest tests

bench: setup
	$(PYTHON) -m wgraph bench

clean:
	rm -f .setup-*.stamp
