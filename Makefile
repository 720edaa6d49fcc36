# e2b-images: guest OS images for E2B-compatible microVM sandboxes.
#
#   make [flavor=e2b-rt|e2b-ci]   build the image (until the image lands: the tools)
#   make tools                    build the C tools into build/
#   make test                     install what is missing, build, run every test layer
#   make deps                     install build and test dependencies (Debian 12/13, root)
#   make fuzz                     run every fuzzer for longer (FUZZ_SECONDS per target)
#   make bench                    run the benchmarks in bench/

flavor ?= e2b-rt
BUILD  ?= build
PYTHON := /usr/bin/python3

.DEFAULT_GOAL := default
.PHONY: default tools san-tools fuzzers units deps test fuzz bench clean

include mk/c.mk
-include pin/pin.mk
-include guard/guard.mk
-include mmds/mmds.mk
-include relay/relay.mk
-include hostlink/hostlink.mk
-include os-image/image.mk
-include ci/ci.mk

# Until the image issue lands, `make` builds the tools.
IMAGE_TARGET ?= tools
default: $(IMAGE_TARGET)

deps:
	@bash mk/deps.sh

# Every layer, one pytest run, one summary line at the end: the C unit tests
# (plain and ASan+UBSan), a short run of every fuzzer, the integration tests
# against both builds, and the image tests once they exist.
test: deps
	@$(MAKE) --no-print-directory tools san-tools units fuzzers
	$(PYTHON) -m pytest -p no:cacheprovider -ra tests $(PYTEST_ARGS)

FUZZ_SECONDS ?= 300
fuzz: fuzzers
	@set -e; for f in $(FUZZERS); do \
	  mkdir -p $(BUILD)/fuzz/corpus/$$f; \
	  echo "fuzz: $$f for $(FUZZ_SECONDS)s"; \
	  $(BUILD)/fuzz/$$f -max_total_time=$(FUZZ_SECONDS) $(BUILD)/fuzz/corpus/$$f tests/fuzz/corpus/$$f; \
	done

bench: tools
	@set -e; for b in bench/*.sh; do echo "== $$b"; bash $$b; done

clean:
	rm -rf $(BUILD)

# Link rules, generated once every fragment has declared its programs.
$(foreach t,$(TOOLS),$(eval $(call link_rule,$(t),$(BUILD),$(BUILD)/obj,$(CC),$(LDHARDEN))))
$(foreach t,$(TOOLS),$(eval $(call link_rule,$(t),$(BUILD)/san,$(BUILD)/san/obj,$(CC),$(SANFLAGS))))
$(foreach t,$(UNITS),$(eval $(call link_rule,$(t),$(BUILD)/unit,$(BUILD)/obj,$(CC),$(LDHARDEN))))
$(foreach t,$(UNITS),$(eval $(call link_rule,$(t),$(BUILD)/san/unit,$(BUILD)/san/obj,$(CC),$(SANFLAGS))))
$(foreach t,$(FUZZERS),$(eval $(call link_rule,$(t),$(BUILD)/fuzz,$(BUILD)/fuzz/obj,$(CLANG),$(FUZZFLAGS))))

# What the tests should run: the declared programs, not whatever lies in build/.
print-%:
	@echo $($*)
