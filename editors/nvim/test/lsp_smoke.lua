-- Run by lsp_smoke.sh in headless Neovim (0.7 or newer): the DL plugin (editors/nvim) starts the
-- language server for a copy of examples/iris.dl with an error put in, and this script waits for
-- a diagnostic on that line, asks for a hover, fixes the error (didChange) and waits for the
-- diagnostic to go, printing what it gets. Exits 1 on the first step that fails.
local file, cmd = vim.env.DL_SMOKE_FILE, vim.split(vim.env.DL_SMOKE_CMD, '\t', { plain = true })
local timeout = tonumber(vim.env.DL_SMOKE_TIMEOUT_MS or '20000')
local function say(...) io.stdout:write(table.concat({ ... }, ' ') .. '\n') end
local function finish(ok, why)
  if not ok then say('FAIL: ' .. why) end
  for _, client in pairs(vim.lsp.get_active_clients and vim.lsp.get_active_clients() or vim.lsp.get_clients()) do
    client.stop()
  end
  vim.wait(2000, function() return #(vim.lsp.get_active_clients and vim.lsp.get_active_clients() or vim.lsp.get_clients()) == 0 end, 50)
  vim.cmd(ok and 'qa!' or 'cquit 1')
end

local v = vim.version()
say(('Neovim %d.%d.%d, server: %s'):format(v.major, v.minor, v.patch, table.concat(cmd, ' ')))
require('dl').setup({ cmd = cmd })
vim.cmd('edit ' .. vim.fn.fnameescape(file))
local buf = vim.api.nvim_get_current_buf()
if vim.bo[buf].filetype ~= 'dl' then return finish(false, 'filetype is "' .. vim.bo[buf].filetype .. '", not dl') end

local function clients()
  if vim.lsp.get_clients then return vim.lsp.get_clients({ bufnr = buf }) end
  local out = {}
  for _, c in pairs(vim.lsp.buf_get_clients(buf)) do table.insert(out, c) end
  return out
end
if not vim.wait(timeout, function() return #clients() > 0 and clients()[1].initialized ~= false end, 50) then
  return finish(false, 'no language server attached')
end
say('attached: ' .. clients()[1].name)

-- 1. A diagnostic on the line with the error.
local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
local bad
for i, l in ipairs(lines) do
  if l:find('clases', 1, true) then bad = i - 1 end
end
local function on_bad_line()
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    if d.lnum == bad then table.insert(out, d) end
  end
  return out
end
if not vim.wait(timeout, function() return #on_bad_line() > 0 end, 50) then
  return finish(false, 'no diagnostic on line ' .. (bad + 1) .. ' within ' .. timeout .. ' ms')
end
for _, d in ipairs(vim.diagnostic.get(buf)) do
  say(('diagnostic %d:%d %s [%s] %s'):format(d.lnum + 1, d.col + 1, vim.diagnostic.severity[d.severity] or '?', tostring(d.code), d.message))
end

-- 2. A hover on the `x` piped into the layers: `forward(...) -> ... = x |> fc1 ...`.
local hline, hcol
for i, l in ipairs(lines) do
  local c = l:find('= x |>', 1, true)
  if c then hline, hcol = i - 1, c + 1 end
end
local params = { textDocument = { uri = vim.uri_from_bufnr(buf) }, position = { line = hline, character = hcol } }
local replies = vim.lsp.buf_request_sync(buf, 'textDocument/hover', params, timeout)
local text
for _, r in pairs(replies or {}) do
  if r.result and r.result.contents then
    local c = r.result.contents
    text = type(c) == 'string' and c or c.value or (c[1] and (c[1].value or c[1])) or vim.inspect(c)
  elseif r.err then
    return finish(false, 'hover error: ' .. vim.inspect(r.err))
  end
end
if not text or text == '' then return finish(false, 'no hover at ' .. (hline + 1) .. ':' .. (hcol + 1)) end
say(('hover %d:%d: %s'):format(hline + 1, hcol + 1, (text:gsub('\n', ' | '))))

-- 3. Fix the error (a didChange); its diagnostic goes.
local fixed = lines[bad + 1]:gsub('clases', 'classes')
vim.api.nvim_buf_set_lines(buf, bad, bad + 1, false, { fixed })
if not vim.wait(timeout, function() return #on_bad_line() == 0 end, 50) then
  return finish(false, 'the diagnostic stayed after the fix')
end
say(('fixed line %d: %d diagnostics left'):format(bad + 1, #vim.diagnostic.get(buf)))
finish(true)
