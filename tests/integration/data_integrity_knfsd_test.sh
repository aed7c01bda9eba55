#!/usr/bin/env bash
# The data-integrity exerciser (data_integrity_test.sh) against Linux knfsd
# 6.1 over lan: the same fio and random-operation checks through nache in
# both write policies, verified at knfsd's own export (inside its guest)
# and through a direct mount of knfsd.
DI_REMOTE=knfsd DI_PROFILE=lan exec bash "$(dirname "$0")/data_integrity_test.sh"
