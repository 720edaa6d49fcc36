# Boot test, publishing and pool templates (ci/README.md).
#
#   make boot-test flavor=e2b-rt|e2b-base|e2b-ci [variant=V]
#                                           boot out/<flavor>/rootfs.ext4 in QEMU, check it
#                                           (V: tests/boot/vm.py's variants, e.g. 512m)
#   make publish registry=R tag=T [flavor=] [cert_dir=D]
#                                           skopeo copy out/<flavor>/oci -> R/<flavor>:T
#   make templates registry=R [tag=T] [flavors="e2b-rt e2b-base e2b-ci"] [host_warmup=uds|cid]
#                                           out/templates/<flavor>.json, pinned by digest

registry ?=
tag      ?=
cert_dir ?=
flavors  ?= $(flavor)
variant  ?= default
boot_timeout ?=

.PHONY: boot-test publish templates

# Boots what is already in out/<flavor>/ (build it first with `make flavor=`);
# no rebuild here, so CI boots exactly what it built and then pushes.
boot-test:
	$(python) tests/boot/vm.py --flavor $(flavor) --variant $(variant) --rootfs $(out)/$(flavor)/rootfs.ext4 \
	  $(if $(boot_timeout),--timeout $(boot_timeout)) --logs $(out)/boot-test

publish:
	@test -n "$(registry)" -a -n "$(tag)" || { echo "publish: set registry= and tag=" >&2; exit 2; }
	$(python) ci/publish.py --registry '$(registry)' --tag '$(tag)' --out-dir '$(out)' \
	  $(if $(cert_dir),--cert-dir '$(cert_dir)') $(flavors)

templates:
	@test -n "$(registry)" || { echo "templates: set registry=" >&2; exit 2; }
	$(python) ci/templates.py --registry '$(registry)' $(if $(tag),--tag '$(tag)') \
	  $(if $(host_warmup),--host-warmup '$(host_warmup)') --out-dir '$(out)' $(flavors)
