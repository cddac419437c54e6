# Checks of the tree itself: the layers, the sizes of files and functions,
# the example configurations in conf/ against the key table, the installed
# names against Debian 12's packages.
LINT_TESTS = tests/lint/layers.sh tests/lint/sizes.sh tests/lint/conf.sh tests/lint/install-names.sh
TESTS += $(LINT_TESTS)
# spdx.sh (every source and script file names its licence) joins
# LINT_TESTS once scripts/add-spdx has run on the whole tree.
EXTRA_DIST += $(LINT_TESTS) tests/lint/spdx.sh scripts/add-spdx \
	scripts/check-layers scripts/check-size \
	src/base/README.md src/wire/README.md src/transport/README.md \
	src/core/README.md src/host/README.md src/dpu/README.md \
	src/memory/README.md src/daemon/README.md src/client/README.md \
	src/ctl/README.md
