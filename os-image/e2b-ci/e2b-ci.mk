# e2b-ci helpers, included by os-image/image.mk.
#
#   make ci-patch-check [archive=FILE]
#       Unpack the pinned code-interpreter archive (through pinfetch and its
#       cache, or FILE) and apply os-image/e2b-ci/PATCHES to it, without mkosi.
#       Run it after changing recipes/code-interpreter.lock or a patch.
archive ?=
.PHONY: ci-patch-check
ci-patch-check: tools
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	a='$(archive)'; \
	if [ -z "$$a" ]; then \
	  a=$$tmp/code-interpreter.tar.gz; \
	  $(build)/pinfetch --lock '$(recipes)/code-interpreter.lock' --name code-interpreter \
	    --output "$$a" --cache '$(cache)/pinfetch' \
	    $(foreach m,$(pin_mirror),--mirror '$(m)') $(if $(filter 1,$(offline)),--offline); \
	fi; \
	os-image/e2b-ci/prepare.sh --archive "$$a" --extra "$$tmp/extra" --work "$$tmp/work"
