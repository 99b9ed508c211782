# Thin wrapper over scripts/dev, which installs, configures, builds and runs.
.PHONY: all build demo test bench clean format
all: build
build: ; scripts/dev build
demo: ; scripts/dev demo
test: ; scripts/dev test
bench: ; scripts/dev bench
format: ; clang-format -i $$(git ls-files '*.cpp' '*.h')
clean: ; rm -rf build
