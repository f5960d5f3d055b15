-- The DL plugin for Neovim: `dlc lsp` started for DL buffers, the tree-sitter parser built and
-- started. Works on Neovim 0.7 (vim.lsp.start_client) and newer (vim.lsp.start).
--
--   require('dl').setup()                                   -- defaults below
--   require('dl').setup({ cmd = { '/path/to/dlc', 'lsp' } })
local M = {}

M.defaults = {
  -- The language server's command line.
  cmd = { 'dlc', 'lsp' },
  -- Start it for every DL buffer.
  lsp = true,
  -- Where a project starts: the nearest folder up from the file holding one of these.
  root_markers = { '.git' },
}
M.options = vim.deepcopy(M.defaults)

-- The folder of this repository's editors/ (this file is editors/nvim/lua/dl/init.lua).
local function editors_dir()
  local this = debug.getinfo(1, 'S').source:sub(2)
  return vim.fn.fnamemodify(this, ':p:h:h:h:h')
end

local function root_dir(buf)
  local name = vim.api.nvim_buf_get_name(buf)
  local start = name ~= '' and vim.fn.fnamemodify(name, ':p:h') or vim.fn.getcwd()
  for _, marker in ipairs(M.options.root_markers) do
    local found = vim.fn.finddir(marker, start .. ';')
    if found == '' then found = vim.fn.findfile(marker, start .. ';') end
    if found ~= '' then return vim.fn.fnamemodify(found, ':p:h:h') end
  end
  return start
end

--- The client configuration for `vim.lsp.start` (or `vim.lsp.start_client`).
function M.lsp_config(buf)
  return {
    name = 'dlc',
    cmd = M.options.cmd,
    root_dir = root_dir(buf or 0),
  }
end

local clients = {} -- Neovim 0.7: one client per root folder

--- Start (or reuse) `dlc lsp` for a buffer; returns the client id.
function M.start_lsp(buf)
  buf = (buf == nil or buf == 0) and vim.api.nvim_get_current_buf() or buf
  if vim.fn.executable(M.options.cmd[1]) ~= 1 then
    vim.notify_once(('dl: %s not found; install dlc or pass cmd to require("dl").setup()'):format(M.options.cmd[1]), vim.log.levels.WARN)
    return nil
  end
  local config = M.lsp_config(buf)
  if vim.lsp.start then
    return vim.lsp.start(config, { bufnr = buf })
  end
  local id = clients[config.root_dir]
  -- get_client_by_id also finds a client still initializing (client_is_stopped does not).
  if not id or not vim.lsp.get_client_by_id(id) then
    id = vim.lsp.start_client(config)
    clients[config.root_dir] = id
  end
  if id then vim.lsp.buf_attach_client(buf, id) end
  return id
end

--- The parser file `:DLBuildParser` writes: Neovim loads `parser/dl.so` from the runtime path.
function M.parser_path()
  return vim.fn.stdpath('data') .. '/site/parser/dl.so'
end

--- Compile editors/tree-sitter-dl/src into parser_path() with cc. Returns ok, message.
function M.build_parser(out)
  out = out or M.parser_path()
  local src = editors_dir() .. '/tree-sitter-dl/src'
  if vim.fn.filereadable(src .. '/parser.c') ~= 1 then
    return false, 'dl: no ' .. src .. '/parser.c (is this plugin inside a dlc checkout?)'
  end
  local cc = vim.env.CC or 'cc'
  vim.fn.mkdir(vim.fn.fnamemodify(out, ':h'), 'p')
  local output = vim.fn.system({ cc, '-shared', '-fPIC', '-O2', '-I', src, src .. '/parser.c', src .. '/scanner.c', '-o', out })
  if vim.v.shell_error ~= 0 then
    return false, 'dl: compiling the parser failed:\n' .. output
  end
  -- Load it now (a runtime folder made just now may not be searched until a restart) and
  -- highlight the DL buffers already open.
  if vim.treesitter.language and vim.treesitter.language.add then
    pcall(vim.treesitter.language.add, 'dl', { path = out })
  else
    pcall(vim.treesitter.require_language, 'dl', out)
  end
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and vim.bo[buf].filetype == 'dl' and not vim.g.dl_no_treesitter then
      M.start_treesitter(buf)
    end
  end
  return true, 'dl: wrote ' .. out
end

local function has_parser()
  if vim.treesitter.language and vim.treesitter.language.add then
    -- 0.9 raises when the parser is missing, 0.10 and later return nil and a message.
    local ok, res, err = pcall(vim.treesitter.language.add, 'dl')
    return ok and err == nil and res ~= false
  end
  -- 0.7 and 0.8: true when loaded already or found on the runtime path, false (silent) if not.
  local ok, res = pcall(vim.treesitter.require_language, 'dl', nil, true)
  return ok and res ~= false
end

--- Highlight a buffer with tree-sitter when the parser is there (Neovim 0.7 and newer).
function M.start_treesitter(buf)
  if not has_parser() then return false end
  if vim.treesitter.start then
    return (pcall(vim.treesitter.start, buf, 'dl'))
  end
  local ok, parser = pcall(vim.treesitter.get_parser, buf, 'dl')
  if not ok then return false end
  vim.treesitter.highlighter.new(parser)
  vim.bo[buf].syntax = ''
  return true
end

--- Register the parser with nvim-treesitter's `:TSInstall dl` (its master branch API; on its
--- main branch see editors/README.md). `url` is a local checkout or a git URL of this repository.
function M.register_nvim_treesitter(url)
  local ok, parsers = pcall(require, 'nvim-treesitter.parsers')
  if not ok or not parsers.get_parser_configs then return false end
  parsers.get_parser_configs().dl = {
    install_info = {
      url = url or vim.fn.fnamemodify(editors_dir(), ':h'),
      location = 'editors/tree-sitter-dl',
      files = { 'src/parser.c', 'src/scanner.c' },
      branch = 'main',
      requires_generate_from_grammar = false,
    },
    filetype = 'dl',
  }
  return true
end

function M.setup(opts)
  M.options = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts or {})
  local group = vim.api.nvim_create_augroup('dl', { clear = true })
  if M.options.lsp then
    vim.api.nvim_create_autocmd('FileType', {
      group = group,
      pattern = 'dl',
      callback = function(args) M.start_lsp(args.buf) end,
    })
  end
end

return M
