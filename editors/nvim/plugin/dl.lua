-- Commands of the DL plugin (the rest is in lua/dl/init.lua):
--   :DLBuildParser   compile editors/tree-sitter-dl into the parser Neovim loads (needs cc)
--   :DLLspStart      start `dlc lsp` for the current buffer (what require('dl').setup() does for every DL buffer)
if vim.g.loaded_dl then
  return
end
vim.g.loaded_dl = true

vim.api.nvim_create_user_command('DLBuildParser', function()
  local ok, msg = require('dl').build_parser()
  vim.notify(msg, ok and vim.log.levels.INFO or vim.log.levels.ERROR)
end, { desc = 'Compile the DL tree-sitter parser (editors/tree-sitter-dl) with cc' })

vim.api.nvim_create_user_command('DLLspStart', function()
  require('dl').start_lsp(vim.api.nvim_get_current_buf())
end, { desc = 'Start dlc lsp for this buffer' })
