-- DL buffers in Neovim: `#` comments, two-space indentation (dlc fmt's layout), and tree-sitter
-- highlighting when the `dl` parser is installed (`:DLBuildParser`). Set `vim.g.dl_no_treesitter`
-- to keep the Vim syntax file's highlighting instead.
if vim.b.did_ftplugin then
  return
end
vim.b.did_ftplugin = true

vim.bo.commentstring = '# %s'
vim.bo.comments = ':#'
vim.bo.expandtab = true
vim.bo.shiftwidth = 2
vim.bo.softtabstop = 2
vim.bo.tabstop = 2
vim.bo.textwidth = 100
vim.bo.formatoptions = vim.bo.formatoptions:gsub('t', '') .. 'croql'
vim.b.undo_ftplugin = 'setlocal commentstring< comments< expandtab< shiftwidth< softtabstop< tabstop< textwidth< formatoptions<'

if not vim.g.dl_no_treesitter then
  require('dl').start_treesitter(vim.api.nvim_get_current_buf())
end
