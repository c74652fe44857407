# make demo: run the quickstart and Llama examples.  make test: run the test suite.  Both install what they need.
PYTHON ?= python3
STAMP := .setup.stamp

.PHONY: setup demo test bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@if [ -z "$${VK_DRIVER_FILES}$${VK_ICD_FILENAMES}" ] \
	    && ! ls /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json >/dev/null 2>&1; then \
	  echo "no Vulkan driver found: installing Mesa's lavapipe"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mesa-vulkan-drivers libvulkan1 >/dev/null; \
	fi
	$(PYTHON) -m pip install -q -e '.[test]'
	@touch $(STAMP)

demo: setup
	$(PYTHON) examples/quickstart.py
	$(PYTHON) examples/llama_generate.py

test: setup
	$(PYTHON) -m pytest tests

bench: setup
	$(PYTHON) -m wgraph bench

clean:
	rm -f $(STAMP)
