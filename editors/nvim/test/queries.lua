-- Run by queries.sh in headless Neovim: loads the compiled parser, compiles each query of
-- editors/nvim/queries/dl/, and checks that the Neovim highlights.scm (last match wins) gives every
-- node of every file the same capture as tree-sitter-dl's highlights.scm does where the first match
-- wins (its own test's rule). Works on Neovim 0.7 and newer.
local parser_path, repo = _G.dl_parser, _G.dl_repo
local failures, files, nodes = {}, 0, 0
local function fail(msg) table.insert(failures, msg) end

local function read(path)
  local f = assert(io.open(path, 'r'))
  local s = f:read('*a')
  f:close()
  return s
end

local add = vim.treesitter.language.add or vim.treesitter.require_language
local ok, err = pcall(add, 'dl', { path = parser_path })
if not ok or err == false then
  ok, err = pcall(vim.treesitter.require_language, 'dl', parser_path)
end
if not ok then fail('cannot load the parser: ' .. tostring(err)) end
local parse = vim.treesitter.query.parse or vim.treesitter.parse_query

local queries = {}
for _, name in ipairs({ 'highlights', 'locals', 'indents', 'textobjects' }) do
  local qok, q = pcall(parse, 'dl', read(repo .. '/editors/nvim/queries/dl/' .. name .. '.scm'))
  if qok then queries[name] = q else fail(name .. '.scm does not compile: ' .. tostring(q)) end
end
local qok, shared = pcall(parse, 'dl', read(repo .. '/editors/tree-sitter-dl/queries/highlights.scm'))
if not qok then fail('tree-sitter-dl highlights.scm does not compile: ' .. tostring(shared)) end

-- The capture that wins on each node: by pattern index, the lowest (first wins) or the highest.
local function winners(query, root, buf, last_wins)
  local best = {}
  for pattern, match in query:iter_matches(root, buf, 0, -1) do
    for id, node in pairs(match) do
      -- Neovim 0.10+ may give a list of nodes per capture.
      local list = type(node) == 'table' and node or { node }
      for _, n in ipairs(list) do
        local name = query.captures[id]
        if name:sub(1, 1) ~= '_' then
          local sr, sc, er, ec = n:range()
          local key = table.concat({ sr, sc, er, ec, n:type() }, ':')
          local cur = best[key]
          if not cur or (last_wins and pattern > cur.pattern) or (not last_wins and pattern < cur.pattern) then
            best[key] = { pattern = pattern, name = name }
          end
        end
      end
    end
  end
  return best
end

if queries.highlights and shared then
  for _, file in ipairs(vim.fn.glob(repo .. '/examples/*.dl', false, true)) do
    files = files + 1
    local buf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(read(file), '\n', { plain = true }))
    local tree = vim.treesitter.get_parser(buf, 'dl'):parse()[1]
    local root = tree:root()
    if root:has_error() then fail(file .. ': the tree has an ERROR node') end
    local want = winners(shared, root, buf, false)
    local got = winners(queries.highlights, root, buf, true)
    for key, w in pairs(want) do
      nodes = nodes + 1
      local g = got[key]
      if not g or g.name ~= w.name then
        fail(string.format('%s: node %s is @%s in Neovim, @%s in tree-sitter-dl', vim.fn.fnamemodify(file, ':t'), key, g and g.name or 'nothing', w.name))
      end
    end
    for key, g in pairs(got) do
      if not want[key] then fail(string.format('%s: node %s is @%s only in Neovim', file, key, g.name)) end
    end
  end
end

print(string.format('Neovim %s: %d files, %d highlighted nodes compared, %d problems', tostring(vim.version and vim.version() and (vim.version().major .. '.' .. vim.version().minor .. '.' .. vim.version().patch) or '?'), files, nodes, #failures))
for i = 1, math.min(#failures, 30) do print('  ' .. failures[i]) end
vim.cmd(#failures == 0 and files > 0 and 'qa!' or 'cquit 1')
