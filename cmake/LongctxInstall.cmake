# Why: `cmake --install build --prefix P` gives a user what they run, without
# the source tree:
#   P/bin/longctx                              the binary
#   P/share/longctx/configs/                   the presets (configs/**/*.textproto)
#   P/share/longctx/launch/mpirun.sh           the Open MPI launcher
#   P/share/longctx/launch/slurm/longctx.sbatch the Slurm job (finds P/bin/longctx on PATH)
#   P/share/longctx/bench/*.py                 the PyTorch peers `longctx bench --peer=pytorch` runs
#   P/share/longctx/tokenizers/*.json          the converted Llama vocabularies, when
#                                              scripts/setup.sh made them (.cache/tokenizers)
#   P/share/doc/longctx/                       LICENSE, NOTICE, README.md, CHANGELOG.md, docs/
# The binary finds P/share/longctx from its own path (base/install_layout.h).
# Paths inside a config (data.path, out_dir, init_from) are the user's files,
# relative to the directory longctx runs in, installed or not.
# tests/release/install_test.sh installs into a scratch prefix and runs a job
# from it, so a file missing here fails a test.
set(LONGCTX_INSTALL_DATA ${CMAKE_INSTALL_DATADIR}/longctx)

install(TARGETS longctx RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/configs/ DESTINATION ${LONGCTX_INSTALL_DATA}/configs
  FILES_MATCHING PATTERN "*.textproto")
install(PROGRAMS ${CMAKE_SOURCE_DIR}/launch/mpirun.sh DESTINATION ${LONGCTX_INSTALL_DATA}/launch)
install(PROGRAMS ${CMAKE_SOURCE_DIR}/launch/slurm/longctx.sbatch DESTINATION ${LONGCTX_INSTALL_DATA}/launch/slurm)
install(PROGRAMS ${CMAKE_SOURCE_DIR}/bench/torch_reference.py ${CMAKE_SOURCE_DIR}/bench/torch_attention_peer.py
  ${CMAKE_SOURCE_DIR}/bench/hf_reference.py DESTINATION ${LONGCTX_INSTALL_DATA}/bench)
# Not in the repository (NOTICE: their own terms): copied when this tree has them.
install(DIRECTORY ${CMAKE_SOURCE_DIR}/.cache/tokenizers/ DESTINATION ${LONGCTX_INSTALL_DATA}/tokenizers
  OPTIONAL FILES_MATCHING PATTERN "*.json")
install(FILES ${CMAKE_SOURCE_DIR}/LICENSE ${CMAKE_SOURCE_DIR}/NOTICE ${CMAKE_SOURCE_DIR}/README.md
  ${CMAKE_SOURCE_DIR}/CHANGELOG.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs
  FILES_MATCHING PATTERN "*.md" PATTERN "*.png" PATTERN "results" EXCLUDE)
