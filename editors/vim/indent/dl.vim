" Vim indent file for DL (dlc), in the layout `dlc fmt` writes: two spaces a level; one level in
" after a line that ends with `{`, `(` or `[`, and after one that ends with `=` (a continued
" definition); a `}`, `)` or `]` that starts a line goes back one; a pipeline's `|>` lines are one
" level in from the line they continue, and the line after a pipeline goes back to that line.
if exists("b:did_indent")
  finish
endif
let b:did_indent = 1

setlocal indentexpr=GetDLIndent(v:lnum)
setlocal indentkeys=0{,0},0),0],!^F,o,O,e,0=\|>
setlocal autoindent nosmartindent nocindent
let b:undo_indent = "setlocal indentexpr< indentkeys< autoindent< smartindent< cindent<"

if exists("*GetDLIndent")
  finish
endif

" A line that continues the statement above: a pipeline stage, `and`, `or`.
let s:cont = '^\s*\%(|>\|and\>\|or\>\)'

" A line without its trailing comment and spaces (a `#` in a string is not a comment).
function! s:Code(lnum) abort
  let line = getline(a:lnum)
  let out = ''
  let in_string = 0
  let i = 0
  while i < len(line)
    let c = line[i]
    if in_string
      if c ==# '\'
        let out .= c . line[i + 1]
        let i += 2
        continue
      elseif c ==# '"'
        let in_string = 0
      endif
    elseif c ==# '"'
      let in_string = 1
    elseif c ==# '#'
      break
    endif
    let out .= c
    let i += 1
  endwhile
  return substitute(out, '\s\+$', '', '')
endfunction

" The nearest line above that has code, or 0.
function! s:PrevCode(lnum) abort
  let l = prevnonblank(a:lnum - 1)
  while l > 0 && s:Code(l) =~# '^\s*$'
    let l = prevnonblank(l - 1)
  endwhile
  return l
endfunction

" The first line of the statement that `lnum` (a `|>`, `and` or `or` line) continues.
function! s:PipelineStart(lnum) abort
  let l = a:lnum
  while l > 1 && s:Code(l) =~# s:cont
    let p = s:PrevCode(l)
    if p == 0
      break
    endif
    let l = s:Base(p)
  endwhile
  return l
endfunction

" The brackets a line leaves open: [column of the last one not closed (0-based) or -1, column of
" the first closer whose opener is on an earlier line or -1].
function! s:Brackets(code) abort
  let stack = []
  let first_extra = -1
  let in_string = 0
  let i = 0
  while i < len(a:code)
    let c = a:code[i]
    if in_string
      if c ==# '\'
        let i += 1
      elseif c ==# '"'
        let in_string = 0
      endif
    elseif c ==# '"'
      let in_string = 1
    elseif c =~# '[{(\[]'
      call add(stack, i)
    elseif c =~# '[})\]]'
      if empty(stack)
        if first_extra < 0
          let first_extra = i
        endif
      else
        call remove(stack, -1)
      endif
    endif
    let i += 1
  endwhile
  return [empty(stack) ? -1 : stack[-1], first_extra]
endfunction

" The line a statement's indentation comes from: for a line that closes brackets opened on earlier
" lines, the line that opened them (and so on up).
function! s:Base(lnum) abort
  let [open, extra] = s:Brackets(s:Code(a:lnum))
  if extra < 0
    return a:lnum
  endif
  let save = getpos('.')
  call cursor(a:lnum, extra + 1)
  let [l, c] = searchpairpos('[{(\[]', '', '[})\]]', 'bnW',
        \ 'synIDattr(synID(line("."), col("."), 1), "name") =~# "String\\|Comment"')
  call setpos('.', save)
  return l > 0 && l < a:lnum ? s:Base(l) : a:lnum
endfunction

function! GetDLIndent(lnum) abort
  let prev = s:PrevCode(a:lnum)
  if prev == 0
    return 0
  endif
  let cur = s:Code(a:lnum)
  let code = s:Code(prev)
  let sw = shiftwidth()
  let [open, extra] = s:Brackets(code)

  " Inside brackets opened mid-line: align after the bracket, as dlc fmt does.
  if open >= 0 && open < len(code) - 1
    return open + 1
  endif
  let base = s:Base(prev)
  let ind = indent(base)
  let base_code = s:Code(base)

  if cur =~# s:cont
    " A pipeline stage: one level in from the line the pipeline starts on.
    return indent(s:PipelineStart(base)) + sw
  endif
  if code =~# '[{(\[]$'
    let ind = indent(base) + sw
  elseif base_code =~# s:cont
    " The line after a pipeline: back to where it started.
    let ind = indent(s:PipelineStart(base))
  elseif code =~# '\%(=\|=>\)$'
    let ind += sw
  else
    " The line after a continued definition (`f(x) =` and its value) goes back to the definition.
    let before = s:PrevCode(base)
    if before > 0 && s:Code(before) =~# '\%(=\|=>\)$' && indent(base) > indent(before)
      let ind = indent(s:Base(before))
    endif
  endif
  if cur =~# '^\s*[}\])]'
    let ind -= sw
  endif
  return ind < 0 ? 0 : ind
endfunction
