"""What the tests share: helpers, fakes and harnesses, one copy each, imported as ``support.<module>``.

``tests/`` is on ``sys.path`` through pytest's ``pythonpath`` setting (``[tool.pytest.ini_options]``
in ``pyproject.toml``), so every test file, whatever its folder, imports ``from support.helpers
import ...``; no test edits ``sys.path`` to reach a fake. Child processes that need one put
``tests/`` on their ``PYTHONPATH``. Nothing here is imported by this file: a child Python with only
``apache-tvm-ffi`` (the runtime venvs) imports ``support.fake_cuda`` alone.

* ``helpers`` — running tools as processes (``tl_aot_cli``) or in this process (``tl_aot_here``), clean environments.
* ``builds`` — building the test kernels' libraries once per session (the fixtures of ``conftest.py`` call these);
  ``with_runtime``, a build's own cache started with the session's launcher runtime object.
* ``venvs`` — fresh venvs for runtime tests, installed into by this interpreter's pip.
* ``snapshot`` — a folder put back as its snapshot holds it, rewriting only what differs.
* ``tree`` — the files a structure test reads, never none.
* ``golden`` — the codegen goldens: the manifest, and one launcher per feature.
* ``records`` — factories of the small records unit tests build by hand (``lowered_variant``).
* ``fake_cuda`` — DLPack tensors that claim to live on ``cuda:0``, for argument checks without a GPU.
* ``elf_images`` — tiny ELF/fatbin images for the image checks.
* ``faultfs``, ``s3faults``, ``chaos`` — the fault-injection harnesses (file system, object store, kills).
* ``doc_blocks`` — the docs' code blocks and their ``docs-test`` markers.
"""
