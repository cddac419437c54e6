# SPDX-License-Identifier: Apache-2.0
# Checks of the tree itself: the layers, the sizes of files and functions,
# the example configurations in conf/ against the key table, the installed
# names against Debian 12's packages.
# spdx.sh: every source and script file names its licence
# (scripts/add-spdx adds the line).
LINT_TESTS = tests/lint/layers.sh tests/lint/sizes.sh tests/lint/conf.sh \
	tests/lint/install-names.sh tests/lint/spdx.sh
TESTS += $(LINT_TESTS)
EXTRA_DIST += $(LINT_TESTS) scripts/add-spdx \
	scripts/check-layers scripts/check-size \
	src/base/README.md src/wire/README.md src/transport/README.md \
	src/core/README.md src/host/README.md src/dpu/README.md \
	src/memory/README.md src/daemon/README.md src/client/README.md \
	src/ctl/README.md
