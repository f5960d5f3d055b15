-- `dlc lsp` for Neovim 0.11's vim.lsp.config (the layout nvim-lspconfig's lsp/*.lua files use).
-- With editors/nvim on the runtime path: `vim.lsp.enable('dlc')` in init.lua, nothing else.
return {
  cmd = { 'dlc', 'lsp' },
  filetypes = { 'dl' },
  root_markers = { '.git' },
}
