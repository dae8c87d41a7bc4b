# Every target sets itself up: a fresh machine needs only python3 (>= 3.11), make and git.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
COLL_LINK := .collections/ansible_collections/gpuops/remediation
# Collections the roles and the Windows action plugins use, taken out of this release of the ansible package on PyPI (Galaxy is not reachable everywhere).
ANSIBLE_PACKAGE := 12.3.0
# kubernetes.core for the roles; ansible.windows for the Windows modules' real path and the execution environment;
# awx.awx for awx/ (docs/awx.md).
VENDORED_COLLECTIONS := kubernetes.core ansible.windows awx.awx
VENDORED := $(foreach c,$(VENDORED_COLLECTIONS),.collections/ansible_collections/$(subst .,/,$(c))/MANIFEST.json)
# Outside the checkout: inside it, ansible-test would list files through this repository's git and find none.
BUILD_ROOT := $(or $(TMPDIR),/tmp)/gpuops-remediation-$(shell printf %s '$(CURDIR)' | md5sum | cut -c1-8)/ansible_collections
BUILD_COLL := $(BUILD_ROOT)/gpuops/remediation
PYTEST := $(BIN)/python -m pytest -p no:cacheprovider
# ansible-test in the physical copy, on the venv's Python, its pip bootstrapped offline (tools/offline_get_pip.py).
ANSIBLE_TEST = $(BIN)/python tools/offline_get_pip.py --install-cache && cd $(BUILD_COLL) && $(BIN)/ansible-test
TEST_PYTHON = $$($(BIN)/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
ANSIBLE_TEST_ARGS = --venv --python $(TEST_PYTHON) --color no

.PHONY: help runtime venv collection-runtime collection demo test checks-ansible-test checks-playbooks units units-ansible-test integration integration-ansible-test molecule sanity lint docs build importer ee-context lanes sanity-pythons bench device-check clean

help:
	@echo "make demo   - reset_gpu.yml against a simulated stuck node on localhost"
	@echo "make test   - every test (units, integration, molecule, sanity, lint, docs, build, importer, lanes)"
	@echo "make bench  - the benchmarks under bench/"
	@echo "make ee-context - the execution environment's build context, with this checkout's tarball (.build/ee/)"

# The runtime (requirements.txt: what the demo and the playbooks need) and, on top of it, the test toolchain.
$(VENV)/.runtime: requirements.txt tools/check_python.py
	@$(PYTHON) tools/check_python.py
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

$(VENV)/.installed: $(VENV)/.runtime requirements-test.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-test.txt
	touch $@

runtime: $(VENV)/.runtime

venv: $(VENV)/.installed

# ansible-playbook and ansible-doc find the collection through this link (see ansible.cfg).
collection-runtime: runtime $(VENDORED)
	@mkdir -p $(dir $(COLL_LINK))
	@ln -sfn ../../.. $(COLL_LINK)

collection: venv collection-runtime

# One collection per rule: adding one to VENDORED_COLLECTIONS vendors only that one.
.collections/ansible_collections/%/MANIFEST.json: tools/vendor_collections.py | runtime
	$(BIN)/python tools/vendor_collections.py --dest .collections --ansible $(ANSIBLE_PACKAGE) $(subst /,.,$*)
	@touch $@

# Only the runtime requirements: the test toolchain is make test's.
demo: collection-runtime
	$(BIN)/ansible-playbook playbooks/demo.yml

# The unit tests run once, through ansible-test (the layout it needs is the one make units reads too).
# Two chains of mostly one-core checks share the two cores (each chain's output printed when it ends), then the
# integration targets take both.
test: collection
	@$(MAKE) --no-print-directory -j2 --output-sync=recurse checks-ansible-test checks-playbooks
	@$(MAKE) --no-print-directory integration
	@if [[ -s $(NOT_RUN_UNITS) ]]; then \
	  echo "unit tests not run here (the kernel refused what they need):"; sort -u $(NOT_RUN_UNITS) | sed 's/^/  /'; \
	else echo "unit tests not run here: none"; fi
	@cat $(LANES_SUMMARY)
	@echo "make test: all passed"

# Each chain runs its steps one after the other.
checks-ansible-test:
	@$(MAKE) --no-print-directory units-ansible-test && $(MAKE) --no-print-directory sanity && \
	  $(MAKE) --no-print-directory sanity-pythons

checks-playbooks:
	@for step in molecule lint docs build importer ee-context lanes; do $(MAKE) --no-print-directory $$step || exit 1; done

units: collection
	$(PYTEST) -q -rs tests/unit

# The same unit tests as ansible-test units runs them (its venv, tests/unit/requirements.txt, its pytest plugins).
# The tests the kernel would not let run are kept out of the copy (sanity rebuilds it) for make test's last lines.
NOT_RUN_UNITS := $(CURDIR)/.build/not-run-units.txt
units-ansible-test: $(BUILD_COLL)
	@mkdir -p $(dir $(NOT_RUN_UNITS)) && rm -f $(NOT_RUN_UNITS)
	$(ANSIBLE_TEST) units $(ANSIBLE_TEST_ARGS) --num-workers 1
	@if [[ -f $(BUILD_COLL)/tests/output/not-run-units.txt ]]; then cp $(BUILD_COLL)/tests/output/not-run-units.txt $(NOT_RUN_UNITS); fi

# Two targets at a time: they build their own simulated nodes; Docker, Slurm and destructive targets run alone.
INTEGRATION_JOBS ?= 2
integration: collection
	GPUOPS_INTEGRATION_JOBS=$(INTEGRATION_JOBS) $(BIN)/python tests/integration/run.py

# The targets that ansible-test integration --local runs as they are (docs/testing.md says why not the others).
INTEGRATION_TARGETS ?= gpu_sim gpu_holders_info gpu_kill gpu_reset nvidia_driver_reload gpu_graphics_restart gpu_report_playbook reset_gpu_playbook
integration-ansible-test: $(BUILD_COLL)
	$(ANSIBLE_TEST) integration --local --python $(TEST_PYTHON) --color no $(INTEGRATION_TARGETS)

# ansible-core 2.16 and 2.18 beside the pinned one (venvs of their own, made once under ~/.cache/gpuops-remediation/lanes/, again when
# their requirements change), and the modules on the GPU nodes' own Pythons (3.8, 3.9, 3.10, 3.12, 3.13 from pyenv):
# tools/core_lanes.py. Its summary (what ran, what did not and why) ends make test's output.
LANES_SUMMARY := $(CURDIR)/.build/lanes-summary.txt
lanes: collection
	@mkdir -p $(dir $(LANES_SUMMARY))
	$(BIN)/python tools/core_lanes.py --summary $(LANES_SUMMARY)

molecule: collection
	@if ls extensions/molecule/*/molecule.yml >/dev/null 2>&1; then \
	  cd extensions && $(BIN)/molecule test --all; \
	else echo "no molecule scenarios yet"; fi

# ansible-test wants a real ansible_collections/<ns>/<name> directory, not a link.
$(BUILD_COLL): FORCE venv
	@rm -rf $(BUILD_COLL) && mkdir -p $(BUILD_COLL)
	@git ls-files -co --exclude-standard -z | xargs -0 -I{} cp -P --parents {} $(BUILD_COLL)/
FORCE:

sanity: $(BUILD_COLL)
	$(ANSIBLE_TEST) sanity $(ANSIBLE_TEST_ARGS) $(SANITY_ARGS)

# compile and import on every target Python of the GPU nodes that pyenv has here (3.8 to 3.13; ansible-test says
# which it skipped for want of an interpreter).
NODE_PYTHON_BINS = $(shell root=$$(pyenv root 2>/dev/null); for v in 3.8 3.9 3.10 3.12 3.13; do \
  ls -d $$root/versions/$$v.*/bin 2>/dev/null | tail -1; done | paste -sd:)
sanity-pythons: $(BUILD_COLL)
	$(BIN)/python tools/offline_get_pip.py --install-cache && cd $(BUILD_COLL) && \
	  PATH=$(NODE_PYTHON_BINS):$$PATH $(BIN)/ansible-test sanity --test compile --test import --venv --color no

lint: collection
	$(BIN)/ansible-lint --profile production

docs: collection
	@for m in $$(ls plugins/modules/*.py | xargs -n1 basename | sed 's/\.py$$//'); do \
	  $(BIN)/ansible-doc gpuops.remediation.$$m > /dev/null || exit 1; echo "ansible-doc $$m: ok"; done
	$(BIN)/python tools/changelog_release.py

build: venv
	@mkdir -p .build/dist
	$(BIN)/ansible-galaxy collection build --force --output-path .build/dist .

importer: build
	cd .build/dist && GALAXY_IMPORTER_CONFIG=$(CURDIR)/tools/galaxy-importer.cfg \
	  $(BIN)/python -m galaxy_importer.main gpuops-remediation-$$(sed -n 's/^version: *//p' $(CURDIR)/galaxy.yml).tar.gz

# The execution environment's build context (.build/ee/) with the tarball of this checkout; no container engine needed:
# podman build -f .build/ee/Containerfile -t <tag> .build/ee (docs/awx.md).
ee-context: venv
	$(BIN)/python tools/ee_context.py --context $(CURDIR)/.build/ee

bench: collection
	$(BIN)/python bench/holder_scan.py
	$(BIN)/python bench/snapshot_cost.py
	$(BIN)/python bench/fleet.py
	$(BIN)/python bench/reclaim_time.py
	$(BIN)/python bench/alert_loop.py

clean:
	rm -rf .build .collections $(dir $(BUILD_ROOT)) tests/output importer_result.json
