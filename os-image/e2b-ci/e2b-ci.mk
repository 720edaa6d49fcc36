# e2b-ci helpers, included by os-image/image.mk.
#
#   make ci-patch-check [pin_mirror=PREFIX] [offline=1]
#       Fetch the pinned code-interpreter tree through pinfetch (verified
#       against recipes/code-interpreter.lock's tree_sha256, through its cache
#       and mirrors) and apply os-image/e2b-ci/PATCHES to it, without mkosi.
#       Run it after changing recipes/code-interpreter.lock or a patch.
.PHONY: ci-patch-check
ci-patch-check: tools
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(build)/pinfetch --lock '$(recipes)/code-interpreter.lock' --name code-interpreter \
	  --output "$$tmp/source" --cache '$(cache)/pinfetch' \
	  $(foreach m,$(pin_mirror),--mirror '$(m)') $(if $(filter 1,$(offline)),--offline); \
	os-image/e2b-ci/prepare.sh --source "$$tmp/source" --extra "$$tmp/extra" --work "$$tmp/work"
