" Run by syntax.sh: Vim's highlighting of DL (editors/vim/syntax/dl.vim) on the examples. No text
" in any example is dlError, and chosen words of examples/iris.dl and examples/gan.dl have the
" highlight groups below. Writes the problems to $DL_VIM_OUT and quits with an error if any.
let s:problems = []
let s:checked = 0
function! s:Group(lnum, col) abort
  return synIDattr(synIDtrans(synID(a:lnum, a:col, 1)), 'name')
endfunction
function! s:Item(lnum, col) abort
  return synIDattr(synID(a:lnum, a:col, 1), 'name')
endfunction

" [line text to find, word, nth occurrence on the line, syntax item]
let s:expect = {
\ 'iris.dl': [
\   ['# A tiny classifier', 'tiny', 1, 'dlComment'],
\   ['use std.nn', 'use', 1, 'dlInclude'],
\   ['model Classifier', 'model', 1, 'dlDefine'],
\   ['model Classifier', 'Classifier', 1, 'dlModelName'],
\   ['model Classifier', 'int', 1, 'dlType'],
\   ['model Classifier', '16', 1, 'dlNumber'],
\   ['fc1 = Linear', 'Linear', 1, 'dlLibrary'],
\   ['forward(x', 'f32', 1, 'dlType'],
\   ['forward(x', '|>', 1, 'dlOperator'],
\   ['forward(x', '->', 1, 'dlOperator'],
\   ['forward(x', 'relu', 1, 'dlBuiltin'],
\   ['data flowers', 'data', 1, 'dlDefine'],
\   ['data flowers', 'flowers', 1, 'dlFunction'],
\   ['data flowers', 'csv', 1, 'dlLibrary'],
\   ['data flowers', 'iris.csv', 1, 'dlString'],
\   ['|> map(r =>', '=>', 1, 'dlOperator'],
\   ['|> map(r =>', '8.0', 1, 'dlFloat'],
\   ['train {', 'train', 1, 'dlDefine'],
\   ['model     = Classifier()', 'model', 1, 'dlRecipeField'],
\   ['data      = flowers', 'data', 1, 'dlRecipeField'],
\   ['optimizer = adam', 'optimizer', 1, 'dlRecipeField'],
\   ['optimizer = adam', 'adam', 1, 'dlLibrary'],
\   ['optimizer = adam', '0.01', 1, 'dlFloat'],
\   ['epochs    = 60', 'epochs', 1, 'dlRecipeField'],
\   ['evaluate all_flowers', 'evaluate', 1, 'dlDefine'],
\   ['evaluate all_flowers', 'every', 1, 'dlRecipe'],
\   ['evaluate all_flowers', 'epoch', 1, 'dlRecipeUnit'],
\   ['log every 100 steps', 'log', 1, 'dlRecipe'],
\   ['log every 100 steps', 'steps', 1, 'dlRecipeUnit'],
\ ],
\ 'gan.dl': [
\   ['train gan {', 'gan', 1, 'dlRecipeName'],
\   ['models     =', 'models', 1, 'dlRecipeField'],
\   ['optimizers =', '2e-4', 1, 'dlFloat'],
\   ['step(x) {', 'step', 1, 'dlRecipe'],
\   ['let z = randn', 'let', 1, 'dlStatement'],
\   ['let z = randn', 'randn', 1, 'dlBuiltin'],
\   ['update d by', 'update', 1, 'dlStatement'],
\   ['update d by', 'by', 1, 'dlStatement'],
\   ['log (d_loss', 'log', 1, 'dlRecipe'],
\   ['|> batch(64, drop_last: true)', 'true', 1, 'dlBoolean'],
\ ],
\ }

for s:file in glob(g:dl_repo . '/examples/*.dl', 0, 1)
  execute 'silent edit ' . fnameescape(s:file)
  let s:name = fnamemodify(s:file, ':t')
  if &filetype !=# 'dl'
    call add(s:problems, s:name . ': filetype is "' . &filetype . '"')
    continue
  endif
  for s:l in range(1, line('$'))
    let s:text = getline(s:l)
    for s:c in range(1, len(s:text))
      if s:Item(s:l, s:c) ==# 'dlError'
        call add(s:problems, printf('%s:%d:%d: %s is dlError', s:name, s:l, s:c, s:text[s:c - 1]))
      endif
    endfor
  endfor
  for [s:find, s:word, s:nth, s:want] in get(s:expect, s:name, [])
    let s:l = search('\V' . escape(s:find, '\'), 'nw')
    if s:l == 0
      call add(s:problems, s:name . ': no line with ' . s:find)
      continue
    endif
    let s:col = -1
    for s:k in range(s:nth)
      let s:col = stridx(getline(s:l), s:word, s:col + 1)
    endfor
    if s:col < 0
      call add(s:problems, printf('%s:%d: no %s', s:name, s:l, s:word))
      continue
    endif
    let s:checked += 1
    for s:c in range(s:col + 1, s:col + len(s:word))
      let s:got = s:Item(s:l, s:c)
      if s:got !=# s:want
        call add(s:problems, printf('%s:%d:%d: %s is %s, wanted %s', s:name, s:l, s:c, s:word, s:got ==# '' ? 'nothing' : s:got, s:want))
        break
      endif
    endfor
  endfor
endfor
call writefile(add(s:problems, printf('%d expectations checked, %d problems', s:checked, len(s:problems))), $DL_VIM_OUT)
execute len(s:problems) == 1 ? 'qa!' : 'cquit'
