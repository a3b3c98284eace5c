"""The console's pages, one module per area (a folder for the job page's three blueprints), each a blueprint.

webapp/app.py registers them. A page imports the shared modules (webapp/ itself, webapp/shared/,
webapp/queries/) and never another page, so each area can change on its own
(tests/unit/test_layers.py, test_a_page_imports_shared_modules_never_another_page).
"""
