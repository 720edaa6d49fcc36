# e2b-images: guest OS images for E2B-compatible microVM sandboxes.
#
# Targets:
#   make [image] [flavor=e2b-rt|e2b-base|e2b-ci]  build the image into out/<flavor>/ (the default goal)
#   make template=DIR             build a template directory on its flavor into out/<name>/ (template/README.md)
#   make flavor=F base=oci:PATH[:REF]|docker-archive:FILE   builder mode: F's runtime onto an image of one's own
#   make repro [flavor=]          build twice from scratch, compare every digest (also template=DIR)
#   make boot-test [flavor=]      boot out/<flavor>/rootfs.ext4 in QEMU and check it
#   make clone-test               snapshot a warm e2b-base in QEMU, restore clones, check the clone step
#   make publish registry=R tag=T push out/<flavor>/oci to R/<flavor>:T
#   make cache-prune cache_registry=R/REPO [older_than_days=30]   evict the shared cache's old entries
#   make templates registry=R     write out/templates/<flavor>.json, pinned by digest
#   make ci-patch-check           apply e2b-ci's patches to the pinned archive, no mkosi
#   make tools                    build the C tools into build/
#   make test                     install what is missing, build, run every test layer
#   make check                    the short loop: units, fuzz smoke, parsers, namespace layers; no image
#   make deps                     install build and test dependencies (Debian 12/13, root)
#   make fuzz                     run every fuzzer for longer (fuzz_seconds per target)
#   make bench                    run the benchmarks in bench/
#   (helpers: san-tools units fuzzers image-preflight guest-tools clean print-VAR)
#
# Knobs (lower case, set on the command line; defaults in brackets):
#   flavor=e2b-rt|e2b-base|e2b-ci   [e2b-rt]   release=trixie|bookworm [trixie]   distro [debian]
#   mirror security_mirror snapshot snapshot_base   apt sources (os-image/README.md)
#   recipes=DIR [recipes]  pin_mirror=PREFIX...   offline=0|1 [0]   cache [out/cache]
#   out=DIR [out]          incremental=0|1 [1]    rootfs_headroom_mb [256]
#   pydeps=pip|debian [pip]      pip_index=URL   (e2b-ci's Python stack)
#   kernels=LIST [python,javascript,r,bash,java]   (e2b-ci's Jupyter kernels)
#   pack=0|1 [1]           mkosi_args=...         (bench/image.sh's peer run)
#   registry tag cert_dir flavors boot_timeout    (ci/ci.mk; cert_dir also for a template's fromImage)   archive=FILE (ci-patch-check)
#   build=DIR [build]      fuzz_seconds [300]     pytest_args=...
#   base=oci:PATH[:REF]|docker-archive:FILE   builder mode (template/README.md)
#   step_cache=0|1 [1] step_cache_max_mb [4096] tenant=NAME template_path=DIR[:DIR...]
#   trust_image_cache=0|1 [0]                     (E2B templates: template/README.md)
#   cache_registry=REGISTRY/REPO cache_registry_push=0|1 [1]   the shared cache (regcache/README.md)
# Toolchain variables keep make's usual names: CC CLANG CFLAGS PKG_CONFIG DESTDIR.
# The upper-case names these knobs once had (BUILD, FUZZ_SECONDS, PYTEST_ARGS,
# PACK, MKOSI_ARGS) are still accepted.

flavor       ?= e2b-rt
out          ?= out
build        ?= $(or $(BUILD),build)
fuzz_seconds ?= $(or $(FUZZ_SECONDS),300)
pytest_args  ?= $(PYTEST_ARGS)
# The one Python every script and test runs with (Debian's, with its packages).
python       := /usr/bin/python3

.DEFAULT_GOAL := image
.PHONY: tools san-tools fuzzers units deps test check clone-test fuzz bench clean

include mk/c.mk
include pin/pin.mk
include guard/guard.mk
include mmds/mmds.mk
include relay/relay.mk
include hostlink/hostlink.mk
include clone/clone.mk
include template/template.mk
include os-image/image.mk
include ci/ci.mk

deps:
	@bash mk/deps.sh

# Every layer, one pytest run, one summary line at the end: the C unit tests
# (plain and ASan+UBSan), a short run of every fuzzer, the integration tests
# against both builds, the image builds and the boot test. Two pytest-xdist
# workers: one takes every test that builds or boots, in order, sharing the
# builds and boots (one QEMU at a time); the other takes make check's
# modules beside it, a module at a time (tests/conftest.py).
PYTEST_XDIST := -n 2 --dist loadgroup
test: deps
	@$(MAKE) --no-print-directory -j$$(nproc) tools san-tools units fuzzers
	E2B_CHECK_TESTS="$(CHECK_TESTS) $(NO_IMAGE_TESTS)" $(python) -m pytest -p no:cacheprovider -ra --durations=25 \
		$(PYTEST_XDIST) tests $(pytest_args)

# The loop before every commit, without image builds and boots: the C
# units, a short fuzz smoke, the parsers, the namespace layers (guard, mmds,
# relays, hostlink against the real envd, the build sandbox) in both tool
# builds. Tests marked `build` are left to make test; tests/check-bin's
# stand-ins for mkosi and QEMU refuse, naming any test that reaches them.
CHECK_TESTS := tests/test_c_units.py tests/test_fuzz_smoke.py tests/test_makefile.py tests/guard tests/mmds \
	tests/relay tests/hostlink tests/sandbox tests/boot/test_checks.py tests/template/test_template_input.py \
	tests/template/test_e2b_json.py tests/template/test_guard_loader.py tests/regcache
# Beside make check's modules, these need no image either; make test runs
# them on the second worker too.
NO_IMAGE_TESTS := tests/pin tests/ci/test_workflow.py tests/image_ci/test_ci_constraints.py
check: deps
	@$(MAKE) --no-print-directory -j$$(nproc) tools san-tools units fuzzers
	PATH="$(CURDIR)/tests/check-bin:$$PATH" FUZZ_SMOKE_SECONDS=3 E2B_CHECK_TESTS="$(CHECK_TESTS)" $(python) -m pytest \
		-p no:cacheprovider -ra --durations=10 $(PYTEST_XDIST) -m "not build" $(CHECK_TESTS) $(pytest_args)

# The clone-safety test alone (tests/boot/test_clone_snapshot.py, part of
# `make test` too): the e2b-base test image (E2B_CLONE_FLAVOR=e2b-rt: the
# runtime alone) booted warm, snapshotted, restored twice per configuration;
# out/clone-test/report.json holds what it compared.
clone-test: deps
	@$(MAKE) --no-print-directory tools
	$(python) -m pytest -p no:cacheprovider -ra tests/boot/test_clone_snapshot.py $(pytest_args)

fuzz: fuzzers
	@set -e; for f in $(FUZZERS); do \
	  mkdir -p $(build)/fuzz/corpus/$$f; \
	  seeds=tests/fuzz/corpus/$$f; [ -d $$seeds ] || seeds=; \
	  echo "fuzz: $$f for $(fuzz_seconds)s"; \
	  $(build)/fuzz/$$f -max_total_time=$(fuzz_seconds) $(build)/fuzz/corpus/$$f $$seeds; \
	done

bench: tools
	@set -e; for b in bench/*.sh; do echo "== $$b"; bash $$b; done

clean:
	rm -rf $(build)

# Link rules, generated once every fragment has declared its programs.
$(foreach t,$(TOOLS),$(eval $(call link_rule,$(t),$(build),$(build)/obj,$(CC),$(LDHARDEN))))
$(foreach t,$(TOOLS),$(eval $(call link_rule,$(t),$(build)/san,$(build)/san/obj,$(CC),$(SANFLAGS))))
$(foreach t,$(UNITS),$(eval $(call link_rule,$(t),$(build)/unit,$(build)/obj,$(CC),$(LDHARDEN))))
$(foreach t,$(UNITS),$(eval $(call link_rule,$(t),$(build)/san/unit,$(build)/san/obj,$(CC),$(SANFLAGS))))
$(foreach t,$(FUZZERS),$(eval $(call link_rule,$(t),$(build)/fuzz,$(build)/fuzz/obj,$(CLANG),$(FUZZFLAGS))))

# What the tests should run: the declared programs, not whatever lies in build/.
print-%:
	@echo $($*)
